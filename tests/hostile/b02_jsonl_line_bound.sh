# B02: a JSONL line is bounded (64 MiB of decompressed text): a longer one, plain or a gzip
# bomb, is a clean error naming the file and the line, in bounded memory, the store untouched.
. "$TESTS_DIR/cli/lib.sh"
expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name s
digest=$(store_digest)
hdr='{"memplay":1}'
# peak RSS in KiB of the last run, where GNU time is there
rss() { if [ -x /usr/bin/time ]; then /usr/bin/time -f %M -o "$T/rss" "$MEMPLAY" "$@" >"$T/out" 2>"$T/err"; rc=$?; else mp "$@"; echo 0 >"$T/rss"; fi; }
{ echo "$hdr"; head -c $((65 << 20)) /dev/zero | tr '\0' '0'; echo; } >"$T/long.jsonl"
rss import "$T/long.jsonl"
[ "$rc" = 1 ] || fail "a 65 MiB line: exit $rc"
has "$T/err" "long.jsonl:2:"
has "$T/err" "longer than 64 MiB"
[ "$(store_digest)" = "$digest" ] || fail "store changed"
# one line of 128 MiB of zeros, gzip-compressed to about 128 KiB
{ echo "$hdr"; head -c $((128 << 20)) /dev/zero; } | gzip -1 >"$T/bomb.jsonl.gz"
rss import "$T/bomb.jsonl.gz"
[ "$rc" = 1 ] || fail "a gzip bomb: exit $rc"
has "$T/err" "bomb.jsonl.gz:2:"
has "$T/err" "longer than 64 MiB"
case "${MEMPLAY_SANITIZED:-}" in '') [ "$(tail -1 "$T/rss")" -lt 400000 ] || fail "the bomb took $(tail -1 "$T/rss") KiB" ;; esac
[ "$(store_digest)" = "$digest" ] || fail "store changed"
[ "$(wc -l <"$T/err")" = 1 ] || fail "more than one message: $(cat "$T/err")"
finish
