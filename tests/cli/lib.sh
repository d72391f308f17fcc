# lib.sh: what memplay's shell tests share. Source it first; it sets up a scratch folder and a store.
set -u
: "${MEMPLAY:?the memplay binary (set by CTest)}"
: "${MEMPLAY_SRC:?the source folder (set by CTest)}"
T=$(mktemp -d "${TMPDIR:-/tmp}/memplay-test.XXXXXX")
trap 'rm -rf "$T"' EXIT
DB="$T/store.db"
export MEMPLAY_DB="$DB"
failures=0

fail() {
  echo "FAIL: $*" >&2
  failures=$((failures + 1))
}

# mp ARGS...: runs memplay; its stdout in $T/out, stderr in $T/err, status in $rc.
mp() {
  "$MEMPLAY" "$@" >"$T/out" 2>"$T/err"
  rc=$?
}

# expect CODE ARGS...: runs memplay and checks the exit status.
expect() {
  local want=$1
  shift
  mp "$@"
  if [ "$rc" != "$want" ]; then
    fail "memplay $* exited $rc, wanted $want; stderr: $(head -c 400 "$T/err")"
    return 1
  fi
  return 0
}

# import_killed DELAY FILE ARGS...: starts `memplay import FILE ARGS...`, kills it (SIGKILL) after
# DELAY seconds and waits for it: 0 when it was killed, 1 when it had already finished.
import_killed() {
  local delay=$1 killed=1
  shift
  "$MEMPLAY" import "$@" >/dev/null 2>&1 &
  local pid=$!
  sleep "$delay"
  if kill -9 "$pid" 2>/dev/null; then killed=0; fi
  wait "$pid" 2>/dev/null
  return "$killed"
}

# has FILE TEXT: FILE contains TEXT.
has() {
  grep -qF -- "$2" "$1" || fail "$(basename "$1") lacks '$2': $(head -c 400 "$1")"
}

# json_get KEY: a top-level number or string from $T/out (one JSON object).
json_get() {
  sed -n "s/.*\"$1\":\"\{0,1\}\([^,\"}]*\).*/\1/p" "$T/out" | head -1
}

# store_digest: everything in the store, for "the store is untouched" checks.
store_digest() {
  if [ -f "$DB" ]; then sqlite3 "$DB" .dump | md5sum; else echo none; fi
}

need_traces() {
  if [ -z "${MEMPLAY_TRACES:-}" ] || [ ! -d "$MEMPLAY_TRACES" ]; then
    echo "skipped: no real traces (MEMPLAY_TRACES)"
    exit 77
  fi
}

finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed" >&2
    exit 1
  fi
  echo ok
  exit 0
}
