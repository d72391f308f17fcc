# snapshot_lib.sh: helpers for the snapshot import tests (sourced, not run).
set -euo pipefail
: "${MEMPLAY:?MEMPLAY must name the memplay binary}"
command -v sqlite3 >/dev/null || { echo "sqlite3 (the command-line shell) is needed" >&2; exit 1; }
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
failures=0

# q DB SQL: one query, rows on stdout (fields separated by |).
q() { sqlite3 "$1" "$2"; }

# check WHAT ACTUAL EXPECTED
check() {
  if [ "$2" != "$3" ]; then
    echo "FAIL: $1: got '$2', expected '$3'" >&2
    failures=$((failures + 1))
  fi
}

# check_has WHAT TEXT PART: TEXT contains PART
check_has() {
  case "$2" in
    *"$3"*) ;;
    *) echo "FAIL: $1: '$3' not in: $2" >&2; failures=$((failures + 1)) ;;
  esac
}

finish() {
  if [ "$failures" -ne 0 ]; then
    echo "$failures check(s) failed" >&2
    exit 1
  fi
  echo "ok"
}
