# snapshot_lib.sh: what the snapshot import tests add to lib.sh (source it instead of lib.sh).
. "$TESTS_DIR/cli/lib.sh"
command -v sqlite3 >/dev/null || { echo "sqlite3 (the command-line shell) is needed" >&2; exit 1; }
WORK=$T

# q DB SQL: one query, rows on stdout (fields separated by |).
q() { sqlite3 "$1" "$2"; }

# check WHAT ACTUAL EXPECTED
check() { [ "$2" = "$3" ] || fail "$1: got '$2', expected '$3'"; }

# check_has WHAT TEXT PART: TEXT contains PART
check_has() {
  case "$2" in
    *"$3"*) ;;
    *) fail "$1: '$3' not in: $2" ;;
  esac
}
