# B26: a store's segment that runs past the end of the address space (its address edited to
# 0xffffffffffffffff): the torch model restored it at the window's start, its block sums wrapped,
# and a checking build stopped on an internal error (exit 134) where a release build went on with
# a wrong state. The restore now refuses it, as bfc's did: validate says why (exit 1), and replay
# starts from an empty allocator and says why, as for any start it cannot rebuild.
. "$TESTS_DIR/cli/lib.sh"
python3 - "$T/two.pickle" <<'PY'
import pickle, sys
MiB = 1 << 20
def seg(addr, blocks):
    return {"device": 0, "address": addr, "total_size": 20 * MiB, "allocated_size": 0, "active_size": 0,
            "requested_size": 0, "stream": 0, "segment_type": "large", "is_expandable": False, "frames": [],
            "blocks": blocks}
def blk(addr, size, state):
    return {"address": addr, "size": size, "requested_size": size if state != "inactive" else 0, "state": state,
            "frames": []}
A, B = 0x7F0000000000, 0x7F0000000000 + 20 * MiB
segs = [seg(A, [blk(A, 2 * MiB, "active_allocated"), blk(A + 2 * MiB, 18 * MiB, "inactive")]),
        seg(B, [blk(B, 4 * MiB, "active_allocated"), blk(B + 4 * MiB, 16 * MiB, "inactive")])]
trace = [{"action": "free_requested", "addr": A, "size": 4 * MiB, "stream": 0, "time_us": 1, "frames": []},
         {"action": "free_completed", "addr": A, "size": 4 * MiB, "stream": 0, "time_us": 2, "frames": []},
         {"action": "alloc", "addr": A, "size": 2 * MiB, "stream": 0, "time_us": 3, "frames": []}]
pickle.dump({"segments": segs, "device_traces": [trace]}, open(sys.argv[1], "wb"), protocol=4)
PY
expect 0 import "$T/two.pickle" --name two
expect 0 replay two --no-save && has "$T/out" "as validate rebuilds it: 2 segments"
sqlite3 "$DB" "UPDATE segments SET address = -1 WHERE address = $((0x7F0000000000 + 20 * 1048576))"
expect 1 validate two --no-save &&
  has "$T/err" "segment at 0xffffffffffffffff of 20971520 bytes runs past the end of the address space"
expect 0 replay two --no-save && has "$T/out" "assumed: an empty allocator at the window's start" &&
  has "$T/out" "runs past the end of the address space"
finish
