#!/usr/bin/env bash
# Benchmarks torchdx against grep-speed baselines in one run, on the same files.
#
#   bench/run.sh            # 128 MB and 1 GB generated logs (needs ~1.2 GB in target/)
#   SIZES="16 128" bench/run.sh
#
# For each size: `cat > /dev/null` (the floor), `rg -F -c -f <the pack's literals>`
# (searching what torchdx searches), and `torchdx diagnose --format json`; best of 3
# wall-clock runs, peak RSS from /usr/bin/time. Then: cost growth between sizes,
# adversarial inputs (a 200 MB single line, 1 M frames, 10 000 chained exceptions, an
# ANSI flood), WASM (Node) against native on a 1 MB log, and the criterion benches
# (pack load, a 100 KB paste, grammars). Ratios matter, not seconds: run it on an
# idle machine.
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES=${SIZES:-"128 1024"}
OUT=target/bench
mkdir -p "$OUT"
command -v rg >/dev/null || { apt-get update -qq && apt-get install -y -qq ripgrep >/dev/null; } || true
[ -x /usr/bin/time ] || { apt-get update -qq && apt-get install -y -qq time >/dev/null; } || true
cargo build -q --release -p torchdx -p torchdx-bench
BIN=target/release/torchdx
$BIN rules literals > "$OUT/literals.txt"

# best-of-3 wall seconds and peak RSS (KB) of a command: prints "secs kb"
measure() {
  local best="" rss=0 tmp
  tmp=$(mktemp)
  for _ in 1 2 3; do
    /usr/bin/time -f "%e %M" -o "$tmp" "$@" >/dev/null 2>&1 || true
    local t m
    read -r t m < "$tmp"
    if [ -z "$best" ] || awk "BEGIN{exit !($t < $best)}"; then best=$t; fi
    [ "$m" -gt "$rss" ] && rss=$m
  done
  rm -f "$tmp"
  echo "$best $rss"
}
ratio() { awk "BEGIN{ if ($2 > 0) printf \"%.2f\", $1 / $2; else print \"inf\" }"; }

printf '\n%-8s %10s %10s %12s %12s %10s %10s\n' size cat_s rg_s torchdx_s torchdx/rg torchdx/cat rss_MB
declare -A TD
for mb in $SIZES; do
  f="$OUT/gen-$mb.log"
  [ -s "$f" ] || target/release/gen-log "$mb" 64 42 > "$f"
  read -r cs _ < <(measure cat "$f")
  read -r rs _ < <(measure rg -F -c -f "$OUT/literals.txt" "$f")
  read -r ts tm < <(measure $BIN diagnose --format json "$f")
  TD[$mb]=$ts
  printf '%-8s %10s %10s %12s %12s %10s %10s\n' "${mb}MB" "$cs" "$rs" "$ts" "$(ratio "$ts" "$rs")" "$(ratio "$ts" "$cs")" "$((tm / 1024))"
done
set -- $SIZES
if [ $# -ge 2 ]; then
  a=$1; b=${!#}
  echo "growth: ${b}MB/${a}MB time ratio $(ratio "${TD[$b]}" "${TD[$a]}") for a size ratio of $(ratio "$b" "$a") (linear = equal)"
fi

echo; echo "adversarial inputs (seconds, peak RSS MB):"
python3 - "$OUT" <<'PY'
import os, sys
out = sys.argv[1]
def w(name, gen):
    p = os.path.join(out, name)
    if not os.path.exists(p):
        with open(p, "w") as f:
            gen(f)
w("adv-long-line.log", lambda f: f.write("x" * (200 * 1024 * 1024) + " RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n"))
def frames(f):
    f.write("Traceback (most recent call last):\n")
    for i in range(1_000_000):
        f.write(f'  File "/w/rec.py", line {i % 50 + 1}, in f\n    return f(n - 1)\n')
    f.write("RecursionError: maximum recursion depth exceeded\n")
w("adv-1m-frames.log", frames)
def chain(f):
    for i in range(10_000):
        f.write(f'Traceback (most recent call last):\n  File "/w/a.py", line {i}, in g\n    h()\nKeyError: {i}\n\nDuring handling of the above exception, another exception occurred:\n\n')
    f.write("RuntimeError: done\n")
w("adv-10k-chain.log", chain)
w("adv-ansi-flood.log", lambda f: [f.write("\x1b[31m\x1b[1m[0;32m" * 20 + "step\n") for _ in range(500_000)])
# Issue 23's shapes, each at 1, 10 and 100 MB: near misses of the device-side-assert
# template along 64 KiB lines, long lines of an anchor word, `Killed ` repeated.
unit = "/w/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [5,0,0] Assertio "
near = (unit * (65536 // len(unit))) + "\n"
words = ("line " * 13107) + "\n"
killed = ("Killed " * 9362) + "\n"
for mb in (1, 10, 100):
    for name, line in (("near-miss", near), ("anchor-words", words), ("killed", killed)):
        w(f"adv-{name}-{mb}.log", lambda f, line=line, mb=mb: [f.write(line) for _ in range(mb * 1048576 // len(line))])
PY
for f in adv-long-line adv-1m-frames adv-10k-chain adv-ansi-flood \
         adv-near-miss-{1,10,100} adv-anchor-words-{1,10,100} adv-killed-{1,10,100}; do
  read -r t m < <(measure $BIN diagnose --format json "$OUT/$f.log")
  printf '  %-16s %8ss %6s MB  (%s MB input)\n' "$f" "$t" "$((m / 1024))" "$(( $(stat -c %s "$OUT/$f.log") / 1048576 ))"
done

if [ -f wasm/pkg-node/torchdx_wasm.js ] && command -v node >/dev/null; then
  echo; echo "WASM (Node) vs native on a 1 MB log:"
  f="$OUT/gen-1.log"; [ -s "$f" ] || target/release/gen-log 1 64 7 > "$f"
  node bench/wasm-vs-native.mjs "$f" target/release/time-diagnose
fi

echo; echo "criterion (pack load, 100 KB paste, grammars):"
# Criterion prints a long name on its own line and, after an earlier run, a "change" line.
cargo bench -q -p torchdx-bench --bench engine -- --quick 2>/dev/null |
  awk '/^[A-Za-z]/ && !/time:/ {name = $1; next} /time:/ && !/%/ {if ($0 ~ /^[A-Za-z]/) print; else print name $0}'

