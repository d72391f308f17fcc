# The GPU commands where there is no GPU: `calibrate`, `record` and `replay --backend cuda` reject
# bad usage with 2, and otherwise say plainly why they cannot run and exit 1, without running the
# program or changing the store. Holds for builds with and without CUDA support.
. "$TESTS_DIR/cli/lib.sh"

expect 0 help replay && has "$T/out" "--backend NAME"
expect 0 help record && has "$T/out" "exit status: the program's own"

# Usage errors come first.
expect 2 calibrate extra
expect 2 calibrate --gpu x && has "$T/err" "--gpu wants a GPU number"
expect 2 record && has "$T/err" "no COMMAND given"
expect 2 record --bogus -- true
expect 2 replay sample --backend tpu && has "$T/err" "unknown backend 'tpu'"
expect 2 replay sample --scale 0
expect 2 replay sample --scale 1.5
expect 2 replay sample --scale 0.5 && has "$T/err" "'--backend cuda' only"
expect 2 replay sample --pace
expect 2 replay sample --pace=gaps && has "$T/err" "'--backend cuda' only"
expect 2 replay sample --backend cuda --pace=sideways && has "$T/err" "--pace takes 'clock' or 'gaps', not 'sideways'"
expect 2 replay sample --backend cuda --allocator bfc:bogus=1 && has "$T/err" "unknown option 'bogus'"
expect 2 replay sample --backend cuda --allocator nosuch && has "$T/err" "unknown allocator 'nosuch'"

expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name sample
before=$(store_digest)

# Without CUDA support built in, or without a GPU, each command says why and exits 1.
if [ "${MEMPLAY_HAVE_CUDA:-0}" = 1 ]; then
  if [ -e /dev/nvidiactl ]; then
    echo "this machine has an NVIDIA driver: the no-GPU messages are checked elsewhere (tests/gpu)"
    finish
  fi
  why="no NVIDIA driver on this machine"
else
  why="built without CUDA support"
fi
expect 1 calibrate && has "$T/err" "$why"
[ -s "$T/out" ] && fail "calibrate printed to stdout: $(cat "$T/out")"
expect 1 calibrate --quick --no-save --json && has "$T/err" "$why"
expect 1 replay sample --backend cuda && has "$T/err" "$why"
expect 1 replay sample --backend cuda --allocator async:release_threshold=max --scale fit --pace && has "$T/err" "$why"
[ "$(store_digest)" = "$before" ] || fail "a GPU command that could not run changed the store"
expect 1 --db "$T/other.db" record --name x -- touch "$T/ran" && has "$T/err" "$why"
[ -e "$T/ran" ] && fail "record ran the program without a GPU"
[ -e "$T/other.db" ] && fail "record created a store without a GPU"
finish
