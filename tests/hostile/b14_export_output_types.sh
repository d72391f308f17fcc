# B14: every file memplay writes goes through one writer that never changes a file's type: it
# renames over a regular file (or nothing), writes a FIFO or device directly, follows a symlink.
. "$TESTS_DIR/cli/lib.sh"

expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name s
expect 0 export s --format jsonl
cp "$T/out" "$T/want"
leftovers() { ls -A "$1" | grep -c 'memplay-out' || true; }

# A character device: written, not replaced. /dev/null stays a device (even as root).
expect 0 export s -o /dev/null
[ -c /dev/null ] || fail "/dev/null is no longer a character device"
# A device that fails to take the data: a clean error naming it, and still a device.
if [ -c /dev/full ]; then
  expect 1 export s -o /dev/full && has "$T/err" "cannot write '/dev/full'"
  [ -c /dev/full ] || fail "/dev/full is no longer a character device"
fi

# A FIFO: written directly, still a FIFO afterwards.
mkfifo "$T/fifo"
cat "$T/fifo" >"$T/fromfifo" &
reader=$!
expect 0 export s -o "$T/fifo"
wait "$reader"
[ -p "$T/fifo" ] || fail "the FIFO was replaced"
cmp -s "$T/fromfifo" "$T/want" || fail "the FIFO's reader got something else"

# A regular file: replaced whole, keeping its permission bits.
echo old >"$T/file.jsonl"
chmod 0640 "$T/file.jsonl"
expect 0 export s -o "$T/file.jsonl"
cmp -s "$T/file.jsonl" "$T/want" || fail "regular file not written"
[ "$(stat -c %a "$T/file.jsonl")" = 640 ] || fail "mode changed to $(stat -c %a "$T/file.jsonl")"

# A symlink: followed to its target; the link stays a link.
echo old >"$T/target.jsonl"
ln -s target.jsonl "$T/link.jsonl"
expect 0 export s -o "$T/link.jsonl"
[ -L "$T/link.jsonl" ] || fail "the symlink was replaced"
cmp -s "$T/target.jsonl" "$T/want" || fail "the symlink's target was not written"
# A dangling symlink and a directory: refused, nothing created.
ln -s missing.jsonl "$T/dangling"
expect 1 export s -o "$T/dangling" && has "$T/err" "'$T/dangling'"
[ -e "$T/missing.jsonl" ] && fail "a dangling link's target was created"
mkdir "$T/dir"
expect 1 export s -o "$T/dir" && has "$T/err" "directory"

# A failed export leaves a regular file exactly as it was, and no temporary file behind.
echo keep >"$T/keep.jsonl"
expect 1 export nosuchtrace -o "$T/keep.jsonl"
[ "$(cat "$T/keep.jsonl")" = keep ] || fail "a failed export changed the file"
[ "$(leftovers "$T")" = 0 ] || fail "temporary files left: $(ls -A "$T")"
[ "$(leftovers "$T/dir")" = 0 ] || fail "temporary files left in dir"
finish
