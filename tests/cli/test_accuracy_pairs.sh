# test_accuracy_pairs.sh: the what-if scenarios against the real pairs of docs/accuracy.md
# ("Every real pair at hand"): scale_fit from three sizes with its leave-one-out band,
# allocations made only at larger sizes, mixed precision from fp32 and from a bf16 trace, and
# the bands the scripts print being the largest errors of the documented tables.
. "$TESTS_DIR/cli/lib.sh"
need_traces
P="$MEMPLAY_TRACES/pytorch"
for f in wed_medium_128_training wed_medium_256_training wed_medium_512_training niu_ctx100_forward_fp32 \
         niu_ctx150_forward_fp32 hyp_large_ctx128_fw_fp32 hyp_large_ctx128_fw_bf16; do
  [ -f "$P/$f.pickle" ] || { echo "skipped: $f is not in MEMPLAY_TRACES"; exit 77; }
done
"$MEMPLAY" help allocators | grep -q '^  torch ' || { echo "skipped: this build has no torch model"; exit 77; }
for n in 128 256 512; do expect 0 import "$P/wed_medium_${n}_training.pickle" --name w$n || finish; done
expect 0 import "$P/niu_ctx100_forward_fp32.pickle" --name n100
expect 0 import "$P/niu_ctx150_forward_fp32.pickle" --name n150
expect 0 import "$P/hyp_large_ctx128_fw_fp32.pickle" --name h32
expect 0 import "$P/hyp_large_ctx128_fw_bf16.pickle" --name h16

# peak KEY TRACE: a real trace's replayed peak under torch
peak() {
  "$MEMPLAY" replay "$2" --allocator torch --no-save --json | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"
}
# variant KEY N: the N-th variant's KEY in $T/out (whatif --json); N=last for the answer
variant() {
  sed 's/},{"name"/\n/g' "$T/out" | { if [ "$2" = last ]; then tail -1; else sed -n "$2p"; fi; } |
    sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p" | head -1
}
# err A B: (A - B) / B in percent, two decimals, signed
err() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%+.2f", 100 * (a - b) / b }'; }
# within A B PCT: |A/B - 1| <= PCT/100
within() { awk -v a="$1" -v b="$2" -v p="$3" 'BEGIN { e = a / b - 1; if (e < 0) e = -e; exit !(e * 100 <= p) }'; }

# scale_fit, three sizes: each input left out and predicted from the other two; the errors the
# scenario prints are those of the predictions against the real replays, and the band is the
# largest of them
if expect 0 whatif w256 scale_fit --json --no-save --set size=256 --set others=w128:128,w512:512 --set at=1024; then
  cp "$T/out" "$T/three.json"
  # variants: 3 recorded (256, 128, 512), 3 left out (256, 128, 512), the prediction
  band=0
  for k in 1 2 3; do
    rec=$(sed 's/},{"name"/\n/g' "$T/three.json" | sed -n "${k}p" | sed -n 's/.*"peak_allocated_bytes":\([0-9]*\).*/\1/p')
    loo=$(sed 's/},{"name"/\n/g' "$T/three.json" | sed -n "$((k + 3))p" | sed -n 's/.*"peak_allocated_bytes":\([0-9]*\).*/\1/p')
    e=$(err "$loo" "$rec")
    size=$(echo "256 128 512" | cut -d' ' -f$k)
    grep -qF "sequence $size from the others" "$T/three.json" || fail "no leave-one-out line for $size"
    grep -qF "sequence $size from the others (base sequence $([ $size = 512 ] && echo 256 || ([ $size = 128 ] && echo 256 || echo 512))): peak allocated $e%" "$T/three.json" ||
      fail "leave-one-out of $size: the printed error is not the prediction's ($e%): $(grep -o "sequence $size from the others[^\"]*" "$T/three.json")"
  done
  grep -q 'error band: ±[0-9.]*% (the largest leave-one-out error of 3 input sizes)' "$T/three.json" || fail "three sizes: no measured band"
  # allocations made only at the larger sizes (512 and up) take the one-trace rules: they grow
  n=$(grep -o '[0-9]* the other trace does not make' "$T/three.json" | head -1 | cut -d' ' -f1)
  [ "${n:-0}" -ge 900 ] || fail "the 512 trace's allocations without a match at 256: ${n:-none}, expected about 1,000"
  # the third size checks the fits: the feed-forward activations, 16 MiB at both 256 and 512
  # (the run at 512 has another feed-forward width), are not taken for constant
  n=$(grep -o 'checked against w128 (sequence 128): [0-9]* allocations' "$T/three.json" | grep -o '[0-9]* allocations' | cut -d' ' -f1)
  [ "${n:-0}" -ge 500 ] || fail "the check against the third size changed ${n:-no} allocations, expected about 750"
  p=$(variant peak_allocated_bytes last)
  real512=$(peak peak_allocated_bytes w512)
  awk -v p="$p" -v r="$real512" 'BEGIN { exit !(p > 1.6 * r) }' ||
    fail "1024 from 128/256/512: $p is not well above the 512 run's $real512 (the attention scores quadruple)"
fi
# two traces, the old form: still accepted, band from the documented table
if expect 0 whatif w256 scale_fit --no-save --set size=256 --set other=w512 --set other_size=512 --set at=128; then
  has "$T/out" "with 2 input traces, docs/accuracy.md"
fi
expect 1 whatif w256 scale_fit --no-save --set size=256 --set others=w512 && has "$T/err" "is not TRACE:SIZE"

# niu forward pass (recorded from empty): its hand-written softmax makes the scores; 100 -> 150
# within 1% of the real run
for key in peak_allocated_bytes peak_reserved_bytes; do
  real=$(peak $key n150)
  if expect 0 whatif n100 scale_fit --json --no-save --set size=100 --set at=150; then
    p=$(variant $key last)
    within "$p" "$real" 1 || fail "niu forward 100 -> 150: $key $p, real $real"
  fi
done

# mixed_precision from fp32: the real bf16 forward pass peaks higher than the fp32 one, and so
# does the prediction, within the documented band
real16=$(peak peak_allocated_bytes h16)
real32=$(peak peak_allocated_bytes h32)
if expect 0 whatif h32 mixed_precision --json --no-save; then
  p=$(variant peak_allocated_bytes last)
  within "$p" "$real16" 3 || fail "mixed_precision hyp fp32 -> bf16: $p, real $real16"
  [ "$p" -gt "$real32" ] || fail "mixed_precision hyp: the prediction $p is not above the fp32 run $real32"
  has "$T/out" "error band: ±1.9%"
fi
# mixed_precision from fp32 where autocast saves memory: the niu forward pass gets smaller
if expect 0 whatif n100 mixed_precision --json --no-save; then
  [ "$(variant peak_allocated_bytes last)" -lt "$(variant peak_allocated_bytes 1)" ] ||
    fail "mixed_precision niu forward: not smaller than fp32"
fi
# from a trace already under autocast: labelled as such, one variant, nothing converted
if expect 0 whatif h16 mixed_precision --json --no-save; then
  has "$T/out" '"name":"autocast (as recorded)"'
  has "$T/out" "nothing is converted twice"
  [ "$(grep -o '"name":' "$T/out" | wc -l)" = 1 ] || fail "mixed_precision on a bf16 trace: more than one variant"
  [ "$(variant peak_allocated_bytes last)" = "$real16" ] || fail "mixed_precision on a bf16 trace: the baseline is not the recorded trace"
fi

# the bands in the scripts are the largest |error| of the documented tables
doc="$MEMPLAY_SRC/docs/accuracy.md"
maxerr() {
  grep "^| $1 |" "$doc" | awk -F'|' '{ for (i = 6; i <= 9; i += 3) { e = $i; gsub(/[ %+-]/, "", e); if (e + 0 > m) m = e + 0 } }
    END { printf "%.1f", m + 0.0000001 }'
}
sf="$MEMPLAY_SRC/scripts/scale_fit.lua"
band1=$(sed -n 's/^local DOC_BAND = {\[1\] = \([0-9.]*\), \[2\] = \([0-9.]*\)}/\1/p' "$sf")
band2=$(sed -n 's/^local DOC_BAND = {\[1\] = \([0-9.]*\), \[2\] = \([0-9.]*\)}/\2/p' "$sf")
[ "$band1" = "$(maxerr 'one trace')" ] || fail "scale_fit one-trace band $band1, the table's largest error $(maxerr 'one trace')"
[ "$band2" = "$(maxerr 'two traces')" ] || fail "scale_fit two-trace band $band2, the table's largest error $(maxerr 'two traces')"
mpb=$(sed -n 's/^local DOC_BAND = \([0-9.]*\)$/\1/p' "$MEMPLAY_SRC/scripts/mixed_precision.lua")
[ "$mpb" = "$(maxerr 'fp32 → bf16 autocast')" ] || fail "mixed_precision band $mpb, the table's $(maxerr 'fp32 → bf16 autocast')"
finish
