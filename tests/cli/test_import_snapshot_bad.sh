#!/usr/bin/env bash
# Bad input: truncated and corrupt pickles, opcodes that would run code, well-formed pickles of
# the wrong structure. Each must fail with exit status 1 and a message naming the file and the
# byte, and leave the store exactly as it was.
. "$TESTS_DIR/cli/snapshot_lib.sh"
data="${MEMPLAY_SRC:?}/tests/data/snapshots"
db="$WORK/store.db"
"$MEMPLAY" import --db "$db" "$data/tiny_p4.pickle" >/dev/null
before=$(sqlite3 "$db" .dump)

# expect_fail FILE PART [memplay import options]: exit 1, the message names FILE and has PART.
expect_fail() {
  local file=$1 part=$2 err rc=0
  shift 2
  err=$("$MEMPLAY" import --db "$db" "$@" "$file" 2>&1 >/dev/null) || rc=$?
  check "$file: exit status" "$rc" 1
  check_has "$file: message" "$err" "'$file'"
  check_has "$file: message" "$err" "$part"
  check "$file: store unchanged" "$(sqlite3 "$db" .dump)" "$before"
}

# Well-formed pickles that are not snapshots, and snapshots with a mistyped field.
expect_fail "$data/bad/mistyped_addr.pickle" "byte 1016: trace entry 2: field 'addr' must be an int, not a str"
expect_fail "$data/bad/negative_size.pickle" "byte 1016: trace entry 2: field 'size' must not be negative (-4096)"
expect_fail "$data/bad/huge_size.pickle" "byte 1016: trace entry 2: field 'size' is out of range (more than 64 bits)"
expect_fail "$data/bad/mistyped_frames.pickle" "byte 1016: trace entry 2: field 'frames' must be a list, not a str"
expect_fail "$data/bad/bad_state.pickle" "block 1 of segment 0: field 'state' must be active_allocated, active_pending_free or inactive, not 'freed'"
expect_fail "$data/bad/entries_not_dicts.pickle" "byte 57: device_traces[0]: holds an int, not a trace entry"
expect_fail "$data/bad/segments_not_list.pickle" "byte 25: the snapshot: field 'segments' must be a list, not a dict"
expect_fail "$data/bad/no_device_traces.pickle" "field 'device_traces' is missing"
expect_fail "$data/bad/no_entries.pickle" "field 'device_traces' has no trace entries"
expect_fail "$data/bad/list_of_segments.pickle" "byte 11: the pickle holds a list, not a memory snapshot"
expect_fail "$data/bad/not_a_snapshot.pickle" "byte 11: the pickle holds a dict without 'segments' and 'device_traces'"
# An opcode that would import and call code: refused where it stands, nothing run.
expect_fail "$data/bad/calls_code.pickle" "byte 994: opcode GLOBAL (0x63) would import or call code; memplay never runs code from a pickle"
printf '\x80\x04\x95\x16\x00\x00\x00\x00\x00\x00\x00\x8c\x05posix\x94\x8c\x06system\x94\x93\x94.' >"$WORK/stack_global.pickle"
expect_fail "$WORK/stack_global.pickle" "byte 28: opcode STACK_GLOBAL (0x93)" --format pytorch_snapshot
printf '\x80\x02}q\x00(X\x08\x00\x00\x00segmentsq\x01]q\x02X\x05\x00\x00\x00callsq\x03cos\nsystem\nq\x04u.' >"$WORK/global.pickle"
expect_fail "$WORK/global.pickle" "byte 36: opcode GLOBAL (0x63)"
# Protocol 0 (no PROTO opcode) and text: not pickles of protocol 2 to 5.
expect_fail "$data/bad/protocol0.pickle" "byte 0: not a pickle of protocol 2 to 5" --format pytorch_snapshot
printf 'not a pickle\n' >"$WORK/text.pickle"
expect_fail "$WORK/text.pickle" "byte 0: not a pickle of protocol 2 to 5" --format pytorch_snapshot
printf '\x80\x07N.' >"$WORK/proto7.pickle"
expect_fail "$WORK/proto7.pickle" "byte 1: pickle protocol 7" --format pytorch_snapshot
: >"$WORK/empty.pickle"
expect_fail "$WORK/empty.pickle" "the file is empty"

# Corrupt: an invalid opcode where STOP was, a byte that is no opcode in the middle.
size=$(wc -c <"$data/tiny_p4.pickle")
head -c $((size - 1)) "$data/tiny_p4.pickle" >"$WORK/corrupt_end.pickle"
printf '\xff' >>"$WORK/corrupt_end.pickle"
expect_fail "$WORK/corrupt_end.pickle" "byte $((size - 1)): invalid opcode 0xff"
{ head -c 11 "$data/tiny_p4.pickle"; printf '\xee'; tail -c +13 "$data/tiny_p4.pickle"; } >"$WORK/corrupt_mid.pickle"
expect_fail "$WORK/corrupt_mid.pickle" "byte 11: invalid opcode 0xee"

# Truncated anywhere: a clean error that says where the pickle ends, never a crash.
for file in tiny_p4 tiny_p2 cpp_layout; do
  size=$(wc -c <"$data/$file.pickle")
  for cut in 1 2 3 9 10 11 12 40 100 $((size / 3)) $((size / 2)) $((size - 2)) $((size - 1)); do
    [ "$cut" -lt "$size" ] || continue
    head -c "$cut" "$data/$file.pickle" >"$WORK/cut.pickle"
    if [ "$cut" -lt 2 ]; then
      expect_fail "$WORK/cut.pickle" "not a pickle of protocol 2 to 5" --format pytorch_snapshot
    else
      expect_fail "$WORK/cut.pickle" "truncated" --format pytorch_snapshot
      expect_fail "$WORK/cut.pickle" "the pickle ends at byte $cut" --format pytorch_snapshot
    fi
  done
done
if [ -d "${MEMPLAY_TRACES:-}/pytorch" ]; then
  head -c 1000000 "$MEMPLAY_TRACES/pytorch/kk_ctx128_fullstep.pickle" >"$WORK/kk_cut.pickle"
  expect_fail "$WORK/kk_cut.pickle" "truncated"
fi
# A gzip-compressed snapshot imports; a truncated gzip stream is an error.
gzip -c "$data/tiny_p4.pickle" >"$WORK/tiny.pickle.gz"
check "gzip: imports" "$("$MEMPLAY" import --db "$WORK/gz.db" "$WORK/tiny.pickle.gz")" "imported 'tiny' (9 events, pytorch_snapshot) into $WORK/gz.db"
head -c 300 "$WORK/tiny.pickle.gz" >"$WORK/cut.pickle.gz"
expect_fail "$WORK/cut.pickle.gz" "is truncated: the gzip stream ends early"

# A trace name that is taken (by another file: the same file again names the trace that holds it).
expect_fail "$data/tiny_p2.pickle" "a trace named 'tiny_p4' already exists" --name tiny_p4
finish
