#!/usr/bin/env bash
# Seeds each fuzz target's corpus from the rule pack's examples and, when present, the
# shared corpus of real logs. Idempotent.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p corpus/diagnose corpus/stream corpus/rule_pack corpus/template corpus/pycall corpus/chunks corpus/hostile_pack corpus/amplify
bin=../target/release/torchdx
[ -x "$bin" ] || bin=../target/debug/torchdx
if [ -x "$bin" ]; then
  "$bin" rules examples --out corpus/diagnose >/dev/null
else
  (cd .. && cargo run -q --release -p torchdx -- rules examples --out fuzz/corpus/diagnose >/dev/null)
fi
if [ -d ../../shared/corpus ]; then
  for d in ../../shared/corpus/*/; do
    [ -f "$d/log.txt" ] && cp "$d/log.txt" "corpus/diagnose/shared-$(basename "$d").log"
  done
fi
for f in corpus/diagnose/*; do printf '\x17' | cat - "$f" > "corpus/stream/$(basename "$f")"; done
# chunks: three cut sizes (1, 3, 64), no stretch (two zero bytes), then the log.
for f in corpus/diagnose/*; do printf '\x03\x00\x02\x3f\x00\x00' | cat - "$f" > "corpus/chunks/$(basename "$f")"; done
# hostile_pack: template bytes, a NUL, then the log: once per line (0), one line (0),
# and a fragment the template's words appear in.
for i in 1 2 3 4 5 6 7 8; do
  { printf "\\x0$i\\x03\\x05\\x2a\\x13\\x06\\x0b\\x21"; printf '\0\0\0'; printf 'ab 12 failed Error: x [0] a.b'; } > "corpus/hostile_pack/seed-$i"
done
# amplify: near misses of the templates (every capture an `x`, the last character cut),
# repeated 65 times per line over 17 lines, then the same with distinct lines; every
# fifth template (the smoke run in CI reads the whole seed corpus first, ~5 runs a second).
n=0
grep -h '^template = "' ../rules/*.toml | sed 's/^template = "//; s/"$//; s/{[^}]*}/x/g; s/.$//' | awk 'NR % 5 == 1' |
  while IFS= read -r t; do
    n=$((n + 1))
    { printf '\x04\x02'; printf '%s ' "$t"; } > "corpus/amplify/near-$n"
    { printf '\x04\x82'; printf '%s ' "$t"; } > "corpus/amplify/distinct-$n"
  done
printf '\xff\x01line ' > corpus/amplify/anchor-words
printf '\xff\x01Killed ' > corpus/amplify/killed
printf '\x00\xffcuDNN error: CUDNN_STATUS_BAD_PARAM ' > corpus/amplify/distinct-cudnn
cp ../rules/*.toml corpus/rule_pack/ 2>/dev/null || true
cp ../rules/data/*.toml corpus/rule_pack/ 2>/dev/null || true
grep -h '^template = ' ../rules/*.toml | sed 's/^template = //; s/^"//; s/"$//' | split -l 1 - corpus/template/t- 2>/dev/null || true
grep -h -A1 '^  File ' ../rules/*.toml | grep -v '^  File\|^--' | sed 's/^ *//' | head -300 | split -l 1 - corpus/pycall/p- 2>/dev/null || true
echo "seeded: $(ls corpus/diagnose | wc -l) logs, $(ls corpus/rule_pack | wc -l) rule files, $(ls corpus/template | wc -l) templates, $(ls corpus/pycall | wc -l) source lines"
