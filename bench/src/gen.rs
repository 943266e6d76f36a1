//! `gen-log SIZE_MB [RANKS] [SEED]`: writes a realistic multi-rank torchrun log to
//! stdout, deterministic for a given seed: per-rank step lines, warnings, tqdm bars with
//! `\r` overwrites, NCCL INFO chatter, and near the end one rank's CUDA OOM traceback
//! followed by every other rank's watchdog timeout and the launcher's teardown.

use std::io::{self, BufWriter, Write};

/// xorshift64*: small, fast, deterministic.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn main() -> io::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let mb: u64 = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(16);
    let ranks: u64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(64);
    let seed: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(42);
    let target = mb * 1024 * 1024;
    let mut rng = Rng(seed | 1);
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(1 << 20, stdout.lock());
    let mut written: u64 = 0;
    let mut step: u64 = 0;
    let culprit = rng.below(ranks);
    let mut line = String::new();
    // The body: ~97% of the size.
    while written < target * 97 / 100 {
        line.clear();
        let r = rng.below(ranks);
        match rng.below(100) {
            0..=69 => {
                step += 1;
                line.push_str(&format!(
                    "[rank{r}]:step {step} epoch {} loss {:.4} lr {:.2e} grad_norm {:.3} tokens/s {}\n",
                    step / 5000,
                    2.0 + (rng.below(1000) as f64) / 1000.0,
                    3e-4,
                    (rng.below(5000) as f64) / 1000.0,
                    180_000 + rng.below(20_000)
                ));
            }
            70..=84 => {
                let pct = rng.below(100);
                line.push_str(&format!(
                    "[rank{r}]:Epoch {}: {:>3}%|{:<20}| {}/5000 [12:{:02}<04:{:02}, 3.{}it/s]\r[rank{r}]:Epoch {}: {:>3}%|{:<20}| {}/5000\n",
                    step / 5000, pct, "#".repeat((pct / 5) as usize), pct * 50, rng.below(60), rng.below(60), rng.below(10),
                    step / 5000, pct + 1, "#".repeat((pct / 5) as usize), pct * 50 + 50
                ));
            }
            85..=92 => {
                line.push_str(&format!(
                    "node{:02}:{}:{} [{}] NCCL INFO Channel {:02}/0 : {} -> {} via P2P/CUMEM/read\n",
                    r / 8,
                    4000 + r,
                    4100 + r,
                    r % 8,
                    rng.below(32),
                    r,
                    (r + 1) % ranks
                ));
            }
            93..=97 => {
                line.push_str(&format!(
                    "[rank{r}]:/opt/conda/lib/python3.11/site-packages/torch/utils/checkpoint.py:{}: UserWarning: torch.utils.checkpoint: the use_reentrant parameter should be passed explicitly.\n",
                    90 + rng.below(10)
                ));
            }
            _ => {
                line.push_str(&format!(
                    "2026-11-29 10:{:02}:{:02},{:03} INFO [trainer] rank {r} saved checkpoint shard {} to /mnt/ckpt/step_{step}/shard_{r}.pt\n",
                    rng.below(60), rng.below(60), rng.below(1000), rng.below(64)
                ));
            }
        }
        written += line.len() as u64;
        out.write_all(line.as_bytes())?;
    }
    // The failure and its collateral.
    let r = culprit;
    let tb = format!(
        "[rank{r}]: Traceback (most recent call last):\n[rank{r}]:   File \"/workspace/llm/pretrain.py\", line 212, in <module>\n[rank{r}]:     train(cfg)\n[rank{r}]:   File \"/workspace/llm/pretrain.py\", line 167, in train\n[rank{r}]:     logits = model(batch[\"input_ids\"])\n[rank{r}]:   File \"/opt/conda/lib/python3.11/site-packages/torch/nn/modules/module.py\", line 1751, in _wrapped_call_impl\n[rank{r}]:     return self._call_impl(*args, **kwargs)\n[rank{r}]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.82 GiB. GPU {} has a total capacity of 79.19 GiB of which 2.41 GiB is free. Including non-PyTorch memory, this process has 76.77 GiB memory in use. Of the allocated memory 61.20 GiB is allocated by PyTorch, and 14.86 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)\n",
        r % 8
    );
    out.write_all(tb.as_bytes())?;
    written += tb.len() as u64;
    let mut k = 0;
    while written < target {
        for o in 0..ranks {
            if o == r {
                continue;
            }
            line.clear();
            line.push_str(&format!(
                "[rank{o}]:[E1129 11:08:03.{:09} ProcessGroupNCCL.cpp:632] [Rank {o}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={}, OpType=ALLREDUCE, NumelIn=4194304, NumelOut=4194304, Timeout(ms)=600000) ran for {} milliseconds before timing out.\n",
                rng.below(1_000_000_000), 91234 + k, 600_000 + rng.below(200)
            ));
            written += line.len() as u64;
            out.write_all(line.as_bytes())?;
        }
        k += 1;
        if k > 3 {
            // Fill the rest with post-mortem DEBUG chatter from the dying ranks.
            while written < target {
                line.clear();
                let o = rng.below(ranks);
                line.push_str(&format!(
                    "[rank{o}]:DEBUG:filelock:Attempting to release lock {} on /tmp/cache/{}.lock\n",
                    140_000_000 + rng.below(1000),
                    rng.below(100)
                ));
                written += line.len() as u64;
                out.write_all(line.as_bytes())?;
            }
        }
    }
    out.write_all(b"W1129 11:08:05.102000 771 torch/distributed/elastic/multiprocessing/api.py:897] Sending process 802 closing signal SIGTERM\n")?;
    out.flush()
}
