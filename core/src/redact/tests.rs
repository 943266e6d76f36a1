use super::*;

fn red(log: &str) -> String {
    redact(log).text
}

/// Every secret class the redactor knows, one line each: (line, the secret it holds).
const SECRETS: &[(&str, &str)] = &[
    ("export AWS_ACCESS_KEY_ID=AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    ("aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"),
    ("git push with ghp_16C7e42F292c6912E7710c838347Ae178B4a failed", "ghp_16C7e42F292c6912E7710c838347Ae178B4a"),
    (
        "GH=github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV",
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV",
    ),
    ("remote: https://a1b2c3d4e5f6a7b8c9d0@github.com/org/repo.git", "a1b2c3d4e5f6a7b8c9d0"),
    (
        "jwt eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9",
    ),
    ("password: hunter2", "hunter2"),
    ("db passwd=Tr0ub4dor&3 ok", "Tr0ub4dor"),
    ("secret_key: 9f8e7d6c5b4a", "9f8e7d6c5b4a"),
    ("curl -H 'X-Api-Key: 5ebe2294ecd0e0f08eab7690d2a6ee69' url", "5ebe2294ecd0e0f08eab7690d2a6ee69"),
    ("Cookie: session=0x9a8b7c6d; csrftoken=abcdef", "session=0x9a8b7c6d"),
    ("Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l", "YWxhZGRpbjpvcGVuc2VzYW1l"),
    ("Authorization: Bearer abc.def.ghi", "abc.def.ghi"),
    ("curl -u ivan:s3cr3tpass https://x", "s3cr3tpass"),
    ("export HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789"),
    ("OPENAI_API_KEY=sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z", "sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4z"),
    ("key AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q in url", "AIzaSyA1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q"),
    ("token glpat-AbCdEfGhIjKlMnOpQrSt12 set", "glpat-AbCdEfGhIjKlMnOpQrSt12"),
    ("SLACK=xoxb-1234567890-abcdefghij", "xoxb-1234567890-abcdefghij"),
    ("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc", "sk_live_4eC39HqLyjWDarjtT1zdp7dc"),
    ("python train.py --hf-token Zx81kq0w9e8r7t6y5u4i", "Zx81kq0w9e8r7t6y5u4i"),
    ("wandb login 0123456789abcdef0123456789abcdef01234567", "0123456789abcdef0123456789abcdef01234567"),
    ("{\"api_key\": \"q8w7e6r5t4y3\"}", "q8w7e6r5t4y3"),
    ("Set-Cookie: id=a3fWa; Expires=Thu", "id=a3fWa"),
];

#[test]
fn every_secret_class_is_replaced() {
    for (line, secret) in SECRETS {
        let r = redact(&format!("{line}\n"));
        assert!(!r.text.contains(secret), "{line:?} kept {secret:?}: {}", r.text);
        assert!(!r.counts.is_empty(), "{line:?}: nothing counted");
    }
}

#[test]
fn identities_and_addresses() {
    let table = [
        ("host      : gpu-node-17.corp.example.com", "gpu-node-17"),
        ("connecting to host gpu-node-17.corp.example.com now", "gpu-node-17"),
        ("srun: error: trainer-a3: task 3: Exited with exit code 1", "trainer-a3"),
        ("slurmstepd: error: *** JOB 4242 ON trainer-a3 CANCELLED AT 2026-01-01 ***", "trainer-a3"),
        ("http://ray-head-7:8265/api/jobs", "ray-head-7"),
        ("SLURM_JOB_USER=ivan", "ivan"),
        ("ssh ivan@login-2 'nvidia-smi'", "ivan"),
        ("ssh ivan@login-2 'nvidia-smi'", "login-2"),
        ("NCCL INFO NET/Socket : Using [0]eth0:fe80::1ff:fe23:4567:890a%eth0<0>", "fe80::1ff:fe23:4567:890a"),
        ("Connect to [2001:db8:85a3::8a2e:370:7334]:29500", "2001:db8:85a3::8a2e:370:7334"),
        ("MASTER_ADDR=10.20.30.40", "10.20.30.40"),
        ("mail alice@example.com", "alice@example.com"),
        ("  File \"/home/alice/proj/train.py\", line 9", "alice"),
        ("db passwd=pw0 ok", "pw0"),
        ("srun -w gpu-node-20 python train.py", "gpu-node-20"),
        ("srun --nodelist=gpu-node-18,gpu-node-19 python", "gpu-node-19"),
        ("SLURM_JOB_NODELIST=gpu-node-[01-04,07] then gpu-node-03 fails", "gpu-node-03"),
        ("SLURM_JOB_NODELIST=gpu-node-[01-04,07] then gpu-node-03 fails", "[01-04,07]"),
    ];
    for (line, gone) in table {
        let t = red(&format!("{line}\n"));
        assert!(!t.contains(gone), "{line:?} kept {gone:?}: {t}");
    }
}

/// A token in a URL goes, the URL's host and path stay (they say what failed), and a
/// webhook's path, which is its credential, goes.
#[test]
fn url_tokens_keep_the_url_and_webhook_paths_go() {
    let t = red("fatal: unable to access 'https://x-access-token:ghs_16C7e42F292c6912E7710c838347Ae178B4a@github.com/acme/trainer.git/'\n");
    assert!(!t.contains("ghs_16C7e42F292c6912E7710c838347Ae178B4a"), "{t}");
    assert!(t.contains("https://x-access-token:<secret1>@github.com/acme/trainer.git/"), "{t}");
    // A private host is a host (redacted as one), its path stays.
    let t = red("git clone https://apikey:s3cr3tVALUE99@gitlab.example.com/a/b.git\n");
    assert!(t.contains("https://apikey:<secret1>@<host1>/a/b.git"), "{t}");
    let t = red("posting to https://hooks.slack.com/services/T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX failed\n");
    assert!(
        !t.contains("XXXXXXXXXXXXXXXXXXXXXXXX") && t.contains("https://hooks.slack.com/services/<secret1> failed"),
        "{t}"
    );
    let t = red("webhook https://discord.com/api/webhooks/123456789012345678/abcDEF-ghiJKL_mnoPQR\n");
    assert!(!t.contains("abcDEF-ghiJKL_mnoPQR"), "{t}");
}

/// What a diagnosis needs is not a secret.
#[test]
fn what_is_not_a_secret_stays() {
    let keep = [
        "cuDNN version 8.9.2.26 TensorRT 8.6.1.6 NCCL 2.18.3.1",
        "NCCL version 2.18.3.1+cuda12.1",
        "    @staticmethod",
        "    def staticmethod_like(x): return staticmethod(x)",
        "HEAD is now at 9fceb02d0ae598e95dc970b74767f19372d61af8 fix loss",
        "generate(max_token=2048, use_auth=True)",
        "pip install sk-learn-extra==0.2.0",
        "tokenizer.pad_token = tokenizer.eos_token",
        "    token = tokenizer(text)",
        "special tokens: pad_token=\"<pad>\" eos_token=</s>",
        "    out = x@w + b",
        "    y = x[1::2]",
        "c10::Error at ::c10::cuda::getDevice 13:23:20.000000",
        "MASTER_ADDR=127.0.0.1 MASTER_PORT=29500",
        "see https://pytorch.org/docs/stable/elastic/errors.html",
        "  File \"/opt/conda/lib/python3.11/site-packages/torch/nn/modules/module.py\", line 1518",
        "mac 00:1b:63:84:45:e6 time 16:45:39",
        "    password: str = field(default=None)",
        "if args.token: login(token=args.token)",
    ];
    for line in keep {
        let r = redact(&format!("{line}\n"));
        assert_eq!(r.text, format!("{line}\n"), "changed: {:?}", r.counts);
    }
}

#[test]
fn a_user_name_is_replaced_where_it_stands_only() {
    let log = "  File \"/home/data/gnn/train.py\", line 5\n    torch.ops.load_library(spec.origin)\nloading /mnt/data/shard0 with data loader\nssh ops@gpu-3 ok\n";
    let t = red(log);
    assert!(t.contains("/home/<user>/gnn/train.py"), "{t}");
    assert!(t.contains("/mnt/data/shard0 with data loader"), "{t}");
    assert!(t.contains("<user>@<host1>"), "{t}");
}

#[test]
fn a_private_key_block_keeps_its_lines() {
    let log = "key:\n-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA0Z3VS5JJcds3xfn\n/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB\n-----END RSA PRIVATE KEY-----\nTraceback (most recent call last):\n";
    let t = red(log);
    assert_eq!(t.lines().count(), log.lines().count(), "{t}");
    assert!(!t.contains("MIIEow") && !t.contains("ygWyF8"), "{t}");
    assert!(t.contains("-----BEGIN RSA PRIVATE KEY-----") && t.contains("Traceback (most recent call last):"), "{t}");
    let inline = red("{\"private_key\": \"-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\\n-----END PRIVATE KEY-----\\n\"}\n");
    assert!(!inline.contains("MIIEvQ"), "{inline}");
}

/// The same value gets the same placeholder everywhere; different values differ.
#[test]
fn placeholders_are_consistent() {
    let log = "host : gpu-a1\nnode gpu-a1 and gpu-b2\n10.0.0.5 then 10.0.0.6 then 10.0.0.5\ntoken=Abc123Def456 and token=Abc123Def456 and token=Zzz999Yyy888\n";
    let t = red(log);
    assert!(t.contains("host : <host1>\nnode <host1> and gpu-b2"), "{t}");
    assert!(t.contains("<ip1> then <ip2> then <ip1>"), "{t}");
    assert!(t.contains("token=<secret1> and token=<secret1> and token=<secret2>"), "{t}");
    let t = red("host : gpu-node-17.corp.example.com\nlost gpu-node-17\n");
    assert_eq!(t, "host : <host1>\nlost <host1>\n");
}

/// A host named late is replaced early when the input is learned first; streaming
/// without the first pass replaces it from where it is learned.
#[test]
fn learning_first_reaches_back() {
    let log = "rank 3 on gpu-x9 lost\nhost : gpu-x9\n";
    assert_eq!(red(log), "rank 3 on <host1> lost\nhost : <host1>\n");
    let mut r = Redactor::new();
    let mut out = Vec::new();
    r.feed(log.as_bytes(), &mut out);
    r.finish(&mut out);
    assert_eq!(String::from_utf8(out).unwrap(), "rank 3 on gpu-x9 lost\nhost : <host1>\n");
}

/// Every byte that is not a secret is kept: line ends, invalid UTF-8, a last line
/// without a newline; and any chunking gives the same bytes.
#[test]
fn bytes_and_lines_are_kept_whatever_the_chunking() {
    let mut log = b"a\r\nbad \xff\xfe bytes password: hunter2\n\nno newline at end token=q1w2e3r4t5".to_vec();
    log.extend_from_slice("\n é ü 10.1.2.3\n".as_bytes());
    let whole = {
        let mut r = Redactor::new();
        let mut out = Vec::new();
        r.feed(&log, &mut out);
        r.finish(&mut out);
        out
    };
    assert!(
        whole.starts_with(b"a\r\nbad \xff\xfe bytes password: <secret1>\n\n"),
        "{}",
        String::from_utf8_lossy(&whole)
    );
    assert_eq!(whole.iter().filter(|&&c| c == b'\n').count(), log.iter().filter(|&&c| c == b'\n').count());
    for size in [1, 2, 3, 7, 64] {
        let mut r = Redactor::new();
        let mut out = Vec::new();
        for c in log.chunks(size) {
            r.feed(c, &mut out);
        }
        r.finish(&mut out);
        assert_eq!(out, whole, "chunks of {size}");
    }
}

/// A line longer than a segment is redacted in segments, in bounded memory, and keeps
/// every byte that is not a secret.
#[test]
fn a_giant_line_is_segmented() {
    let mut line = "word ".repeat(SEGMENT / 5 * 3);
    line.push_str("password: hunter2 end");
    let mut r = Redactor::new();
    let mut out = Vec::new();
    for c in line.as_bytes().chunks(65536) {
        r.feed(c, &mut out);
        assert!(r.pending.len() <= SEGMENT, "pending grew to {}", r.pending.len());
    }
    r.finish(&mut out);
    let t = String::from_utf8(out).unwrap();
    assert!(t.ends_with("password: <secret1> end") && t.len() == line.len() - "hunter2".len() + "<secret1>".len());
}

/// Work per line is linear: a line of a million separators and quotes.
#[test]
fn hostile_lines_stay_linear() {
    for unit in ["a=\"", "a:", "x@", "::", "https://", "-u "] {
        let line = unit.repeat(200_000);
        let t0 = std::time::Instant::now();
        let _ = red(&line);
        // Generous: a quadratic scan of this line takes minutes.
        assert!(t0.elapsed().as_secs() < 20, "{unit:?} took {:?}", t0.elapsed());
    }
}

#[test]
fn summary_names_the_classes() {
    let mut r = Redactor::new();
    let mut out = Vec::new();
    r.feed(b"host : gpu-a1\nAKIAIOSFODNN7EXAMPLE and 10.1.1.1\nplain\n", &mut out);
    r.finish(&mut out);
    assert_eq!(r.summary(), "redacted 3 values in 2 of 3 lines: 1 host name, 1 IPv4 address, 1 AWS access key id");
    assert_eq!(Redactor::new().summary(), "nothing to redact in 0 lines");
}

#[test]
fn redaction_is_stable_on_its_own_output() {
    let log: String = SECRETS.iter().map(|(l, _)| format!("{l}\n")).collect();
    let once = red(&log);
    assert_eq!(red(&once), once);
}

#[test]
fn scrub_secrets_only() {
    assert_eq!(scrub_secrets("login with token=abcdef123456 failed"), "login with token=<secret> failed");
    assert_eq!(scrub_secrets("shapes (4x3 and 5x6) on gpu-3 10.0.0.1"), "shapes (4x3 and 5x6) on gpu-3 10.0.0.1");
}

#[test]
fn hits_do_not_overlap() {
    let known = detect::Known::default();
    let line = "Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig and HF_TOKEN=hf_AbCdEfGhIjKlMnOpQrStUvWxYz0123456789";
    let hits = detect::hits(line, &known);
    assert!(hits.windows(2).all(|w| w[0].end <= w[1].start), "{hits:?}");
    assert!(hits.iter().any(|h| h.text(line).starts_with("eyJ")), "{hits:?}");
}
