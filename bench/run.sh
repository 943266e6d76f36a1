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

# The six distinctive literals issue 20 measures against: where a literal-grep-fast scan is.
printf '%s\n' 'Traceback (most recent call last)' 'Error' 'Watchdog caught' 'ChildFailedError' \
  'CUDA out of memory' 'Expected all tensors' > "$OUT/six.txt"
# BASELINE=path/to/an/older/torchdx adds its column: ratios against the code before a change.
BASELINE=${BASELINE:-}
printf '\n%-8s %8s %8s %8s %8s %10s %9s %9s %9s %8s\n' size wc_s cat_s rg_s rg6_s torchdx_s /wc /rg /rg6 rss_MB
declare -A TD
for mb in $SIZES; do
  f="$OUT/gen-$mb.log"
  [ -s "$f" ] || target/release/gen-log "$mb" 64 42 > "$f"
  read -r ws _ < <(measure wc -l "$f")
  read -r cs _ < <(measure cat "$f")
  read -r rs _ < <(measure rg -F -c -f "$OUT/literals.txt" "$f")
  read -r r6 _ < <(measure rg -F -c -f "$OUT/six.txt" "$f")
  read -r ts tm < <(measure $BIN diagnose --format json "$f")
  TD[$mb]=$ts
  printf '%-8s %8s %8s %8s %8s %10s %9s %9s %9s %8s\n' "${mb}MB" "$ws" "$cs" "$rs" "$r6" "$ts" \
    "$(ratio "$ts" "$ws")" "$(ratio "$ts" "$rs")" "$(ratio "$ts" "$r6")" "$((tm / 1024))"
  if [ -n "$BASELINE" ]; then
    read -r bs bm < <(measure "$BASELINE" diagnose --format json "$f")
    printf '%-8s baseline %s: %ss, %s MB; this build is %sx faster\n' "${mb}MB" "$BASELINE" "$bs" "$((bm / 1024))" "$(ratio "$bs" "$ts")"
  fi
done
set -- $SIZES
if [ $# -ge 2 ]; then
  a=$1; b=${!#}
  echo "growth: ${b}MB/${a}MB time ratio $(ratio "${TD[$b]}" "${TD[$a]}") for a size ratio of $(ratio "$b" "$a") (linear = equal)"
fi

# A log folder: the first size's log split into one file per rank (64 files), read on
# one thread and on every core.
first=${SIZES%% *}
dir="$OUT/folder-$first"
if [ ! -d "$dir" ]; then
  mkdir -p "$dir"
  awk -v d="$dir" 'match($0, /^\[rank[0-9]+\]:/) { r = substr($0, 6, RLENGTH - 7); print substr($0, RLENGTH + 1) > (d "/rank-" r ".log"); next }
                   { print > (d "/launcher.log") }' "$OUT/gen-$first.log"
fi
read -r f1 _ < <(measure $BIN diagnose --format json -j 1 "$dir")
read -r fn fm < <(measure $BIN diagnose --format json "$dir")
echo "folder of $(ls "$dir" | wc -l) files (${first} MB): 1 thread ${f1}s, $(nproc) threads ${fn}s (ratio $(ratio "$fn" "$f1")), peak RSS $((fm / 1024)) MB"

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
# template along 64 KiB lines, long lines of an anchor word, `Killed ` repeated, and a
# message that matches glued 48 times into each kilobyte line (a report every 21 bytes).
unit = "/w/Loss.cu:250: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], thread: [5,0,0] Assertio "
near = (unit * (65536 // len(unit))) + "\n"
words = ("line " * 13107) + "\n"
killed = ("Killed " * 9362) + "\n"
glued = ("CUDA error: some tex " * 48) + "\n"
for mb in (1, 10, 100):
    for name, line in (("near-miss", near), ("anchor-words", words), ("killed", killed), ("glued", glued)):
        w(f"adv-{name}-{mb}.log", lambda f, line=line, mb=mb: [f.write(line) for _ in range(mb * 1048576 // len(line))])
PY
for f in adv-long-line adv-1m-frames adv-10k-chain adv-ansi-flood \
         adv-near-miss-{1,10,100} adv-anchor-words-{1,10,100} adv-killed-{1,10,100} adv-glued-{1,10,100}; do
  read -r t m < <(measure $BIN diagnose --format json "$OUT/$f.log")
  printf '  %-16s %8ss %6s MB  (%s MB input)\n' "$f" "$t" "$((m / 1024))" "$(( $(stat -c %s "$OUT/$f.log") / 1048576 ))"
done

# A third-party pack (`--rules`): the template `hostile_pack` found (two `any` captures
# in a row, then a shape and an alternative that fail) over short lines that each begin
# with its head, at 1 and 10 MB, 25-byte and 9-byte lines.
hp="$OUT/hostile-pack"
mkdir -p "$hp/rules"
cat > "$hp/rules/two-any.toml" <<'TOML'
id = "two-any"
family = "other"
title = "Widget failed"
summary = "A third-party rule whose template is two any captures in a row."
mechanism = "Found by the hostile_pack fuzz target: each try of the second capture read up to 2,048 bytes again."
checklist = ["Measure it."]
fix = "None: a benchmark."
verify = "bench/run.sh"
prevent = "fuzz/README.md"
next_action = "None."
related = []

[[match]]
template = "Widget {any:c1}{any:c1}{shape:c0}{a|b}"
torch = ">=2.0"
TOML
for mb in 1 10; do
  for unit in "Widget aaaaaaaaaaaaaaaaa" "Widget a"; do
    f="$hp/two-any-$((${#unit} + 1))-$mb.log"
    [ -s "$f" ] || { yes "$unit" | head -c $((mb * 1048576)) > "$f" || true; }
    read -r t m < <(measure $BIN diagnose --format json --rules "$hp/rules" "$f")
    printf '  %-16s %8ss %6s MB  (%s MB input, %s-byte lines, third-party pack)\n' two-any "$t" "$((m / 1024))" "$mb" "$((${#unit} + 1))"
  done
done

cargo build -q --release -p torchdx-bench --bin near-miss
# 64 KiB lines (the longest kept whole), kilobyte lines, and one near miss a line.
for len in 65536 1024 1; do
  echo; echo "every template's own near miss along $len-byte lines, 1 MB each (bench near-miss), slowest five:"
  target/release/near-miss 1 --line "$len" > "$OUT/near-miss-$len.txt" 2>&1
  head -5 "$OUT/near-miss-$len.txt"; tail -1 "$OUT/near-miss-$len.txt"
done

if [ -f wasm/pkg-node/torchdx_wasm.js ] && command -v node >/dev/null; then
  echo; echo "WASM (Node) vs native on a 1 MB log:"
  f="$OUT/gen-1.log"; [ -s "$f" ] || target/release/gen-log 1 64 7 > "$f"
  node bench/wasm-vs-native.mjs "$f" target/release/time-diagnose
  # The 100 KB paste of criterion's `diagnose/paste_100k`: filler lines, then an example.
  p="$OUT/paste-100k.log"
  if [ ! -s "$p" ]; then
    ex=examples/device-mismatch.log
    n=$(( (102400 - $(stat -c %s "$ex") + 65) / 66 ))
    { yes 'step 1200 loss 2.1183 lr 3.00e-04 grad_norm 0.917 tokens/s 183211' | head -n "$n" || true; cat "$ex"; } > "$p"
  fi
  echo "WASM (Node) vs native on the 100 KB paste, and the WASM cold start:"
  node bench/wasm-vs-native.mjs "$p" target/release/time-diagnose
  node bench/wasm-cold.mjs "$p" 7
fi

echo; echo "criterion (pack load, 100 KB paste, grammars):"
# Criterion prints a long name on its own line and, after an earlier run, a "change" line.
cargo bench -q -p torchdx-bench --bench engine -- --quick 2>/dev/null |
  awk '/^[A-Za-z]/ && !/time:/ {name = $1; next} /time:/ && !/%/ {if ($0 ~ /^[A-Za-z]/) print; else print name $0}'

