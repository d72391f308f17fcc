# Accuracy of the scenarios against real traces (docs/accuracy.md): scale_fit predicts the
# wed_medium training step's peak at context 256 from the trace at 128 (and back), within the
# error published; the two-trace fit reproduces the traces it was fitted on exactly.
. "$TESTS_DIR/cli/lib.sh"
need_traces
P="$MEMPLAY_TRACES/pytorch"
[ -f "$P/wed_medium_128_training.pickle" ] && [ -f "$P/wed_medium_256_training.pickle" ] || {
  echo "skipped: the wed_medium traces are not in MEMPLAY_TRACES"
  exit 77
}
"$MEMPLAY" help allocators | grep -q '^  torch ' || {
  echo "skipped: this build has no torch model"
  exit 77
}
if ! "$MEMPLAY" import "$P/wed_medium_128_training.pickle" --name w128 >/dev/null 2>"$T/err"; then
  if grep -q "format" "$T/err"; then
    echo "skipped: this build cannot import PyTorch snapshots"
    exit 77
  fi
  fail "import of wed_medium_128_training: $(cat "$T/err")"
  finish
fi
expect 0 import "$P/wed_medium_256_training.pickle" --name w256

# peak KEY TRACE [OPTION]: the replayed peak of a real trace under torch (from the state at the
# window's start that validate rebuilds: the recorded peak; --live-start: from its live blocks,
# as a scenario's transformed trace starts)
peak() {
  "$MEMPLAY" replay "$2" --allocator torch --no-save --json ${3:+"$3"} | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"
}
# predicted KEY: the last variant's peak in $T/out (whatif --json)
predicted() {
  sed 's/},{"name"/\n/g' "$T/out" | tail -1 | sed -n "s/.*\"$1\":\([0-9]*\).*/\1/p"
}
# within A B PCT: |A/B - 1| <= PCT/100
within() {
  awk -v a="$1" -v b="$2" -v p="$3" 'BEGIN { e = a / b - 1; if (e < 0) e = -e; exit !(e * 100 <= p) }'
}

for key in peak_allocated_bytes peak_reserved_bytes; do
  real256=$(peak $key w256)
  real128=$(peak $key w128)
  # one trace, 128 -> 256, attention scores quadratic (batch 4, 16 heads): within 1%
  if expect 0 whatif w128 scale_fit --json --no-save --set size=128 --set at=256 --set batch=4 --set heads=16; then
    p=$(predicted $key)
    within "$p" "$real256" 1 || fail "scale_fit 128 -> 256: $key predicted $p, real $real256"
  fi
  # and back, 256 -> 128
  if expect 0 whatif w256 scale_fit --json --no-save --set size=256 --set at=128 --set batch=4 --set heads=16; then
    p=$(predicted $key)
    within "$p" "$real128" 1 || fail "scale_fit 256 -> 128: $key predicted $p, real $real128"
  fi
  # without heads and batch, the softmax gives the scores' size: the same prediction
  if expect 0 whatif w128 scale_fit --json --no-save --set size=128 --set at=256; then
    p=$(predicted $key)
    within "$p" "$real256" 1 || fail "scale_fit 128 -> 256 without heads: $key predicted $p, real $real256"
  fi
  # two traces: the fit gives back the trace it starts from, exactly
  if expect 0 whatif w128 scale_fit --json --no-save --set size=128 --set other=w256 --set other_size=256 --set at=256; then
    p=$(predicted $key)
    live256=$(peak $key w256 --live-start)
    [ "$p" = "$live256" ] || fail "scale_fit two traces at 256: $key $p, the trace replayed from its live blocks $live256"
  fi
done

# At 512, where no real run is at hand, the one-trace predictions from either size agree with
# the two-trace fit within 1.5% (docs/accuracy.md). From 256 the scores' size is also the
# feed-forward activations' and gradients': the call stacks tell 408 scores among them.
for key in peak_allocated_bytes peak_reserved_bytes; do
  expect 0 whatif w128 scale_fit --json --no-save --set size=128 --set other=w256 --set other_size=256 --set at=512 || continue
  both=$(predicted $key)
  for from in 128 256; do
    if expect 0 whatif w$from scale_fit --json --no-save --set size=$from --set at=512 --set batch=4 --set heads=16; then
      p=$(predicted $key)
      within "$p" "$both" 1.5 || fail "scale_fit $from -> 512: $key $p, two traces $both"
    fi
  done
done
if expect 0 whatif w256 scale_fit --no-save --set size=256 --set at=512 --set batch=4 --set heads=16; then
  has "$T/out" "408 taken for scores"
fi

# The kk job (a 2.7B-class transformer: 32 layers, width 2560, 32 heads, batch 4) at contexts
# 128 and 512, run from different lines of its driver: one trace predicts the other within 1%.
if [ -f "$P/kk_ctx128_fullstep.pickle" ] && [ -f "$P/kk_ctx512_fullstep.pickle" ]; then
  expect 0 import "$P/kk_ctx128_fullstep.pickle" --name k128
  expect 0 import "$P/kk_ctx512_fullstep.pickle" --name k512
  for key in peak_allocated_bytes peak_reserved_bytes; do
    real512=$(peak $key k512)
    real128=$(peak $key k128)
    if expect 0 whatif k128 scale_fit --json --no-save --set size=128 --set at=512 --set batch=4 --set heads=32; then
      p=$(predicted $key)
      within "$p" "$real512" 1 || fail "kk scale_fit 128 -> 512: $key predicted $p, real $real512"
    fi
    if expect 0 whatif k512 scale_fit --json --no-save --set size=512 --set at=128 --set batch=4 --set heads=32; then
      p=$(predicted $key)
      within "$p" "$real128" 1 || fail "kk scale_fit 512 -> 128: $key predicted $p, real $real128"
    fi
  done
  # two traces: the call sites that differ only in the driver's frames are paired, so that
  # every allocation finds its match
  if expect 0 whatif k128 scale_fit --no-save --set size=128 --set other=k512 --set other_size=512 --set at=1024; then
    has "$T/out" "call sites found in one trace only paired"
    has "$T/out" " 0 the other trace does not make"
  fi
fi
finish
