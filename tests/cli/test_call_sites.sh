# Call sites in reports and JSON drop the unwinder's and the interpreter's frames (as PyTorch's
# memory_viz does) and name the first user frame: a real snapshot recorded with C++ frames.
. "$TESTS_DIR/cli/lib.sh"
need_traces

expect 0 import "$MEMPLAY_TRACES/pytorch/sil_small_from_empty.pickle"
expect 0 replay sil_small_from_empty --no-save
sed -n '/largest call sites/,/^time/p' "$T/out" >"$T/sites"
[ -s "$T/sites" ] || fail "no call sites: $(cat "$T/out")"
grep -qE "unwind::unwind|CapturedTraceback|_PyEval|PyObject_|gather_with_cpp" "$T/sites" && fail "hidden frames shown: $(cat "$T/sites")"
has "$T/sites" "custom_softmax (/root/autodl-tmp/assignment2-systems/cs336_systems/trace_peak_memory.py:7)"
has "$T/sites" "torch::autograd::generated::DivBackward0::apply"
expect 0 replay sil_small_from_empty --no-save --json
grep -q '"site":"torch::unwind' "$T/out" && fail "hidden frames in --json"
grep -q '"site":"custom_softmax (' "$T/out" || fail "no user frame in --json"
finish
