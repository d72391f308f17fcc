# The README's tour runs as written: every fenced shell block of README.md, in order, in a scratch
# folder holding build/ (this memplay), traces/ and scripts/, as a user would after the quickstart.
# In a block, each line starting with "$ " is a command; it must exit 0, or the status its comment
# gives as "(exit N)". A block preceded by "<!-- readme-test: skip (why) -->" is not run. Blocks
# other sections add are run too: a new block either runs as written or says why it cannot.
. "$TESTS_DIR/cli/lib.sh"
readme="${README:-$MEMPLAY_SRC/README.md}"

tour="$T/tour"
mkdir -p "$tour"
ln -s "$(cd "$(dirname "$MEMPLAY")" && pwd)" "$tour/build"
ln -s "$MEMPLAY_SRC/traces" "$tour/traces"
ln -s "$MEMPLAY_SRC/scripts" "$tour/scripts"
[ -x "$tour/build/memplay" ] || { echo "skipped: the binary is not named memplay ($MEMPLAY)"; exit 77; }

# The commands, as a script: each in a group of its own (its comment ends with the line), its
# output in a log, its status checked against the one its comment documents.
awk -v logdir="$T" '
  function flush_marker() { skip = pending_skip; pending_skip = 0 }
  /^<!-- readme-test: skip/ { pending_skip = 1; next }
  !inblock && /^```/ {
    lang = substr($0, 4); gsub(/[ \t]/, "", lang)
    inblock = 1; flush_marker()
    run = !skip && (lang == "" || lang == "sh" || lang == "shell" || lang == "bash" || lang == "console")
    next
  }
  inblock && /^```/ { inblock = 0; next }
  !inblock && NF { pending_skip = (pending_skip && /^<!--/) }
  inblock && run && /^\$ / {
    cmd = substr($0, 3)
    want = 0
    if (match(cmd, /\(exit [0-9]+\)/)) want = substr(cmd, RSTART + 6, RLENGTH - 7) + 0
    printf "{\n%s\n} >\"%s/cmd.%d.log\" 2>&1\n", cmd, logdir, NR
    printf "check $? %d %d\n", want, NR
  }
' "$readme" >"$T/tour.body"
[ -s "$T/tour.body" ] || fail "no commands found in $readme"

{
  echo 'shopt -s expand_aliases'
  echo 'failures=0'
  echo 'check() {'
  echo '  if [ "$1" != "$2" ]; then'
  echo "    echo \"FAIL: README.md:\$3: exited \$1, wanted \$2: \$(sed -n \"\$3p\" '$readme')\" >&2"
  echo "    sed 's/^/    /' '$T'/cmd.\$3.log | tail -5 >&2"
  echo '    failures=$((failures + 1))'
  echo '  fi'
  echo '}'
  cat "$T/tour.body"
  echo 'exit $((failures > 0))'
} >"$T/tour.sh"

ncmds=$(grep -c '^check ' "$T/tour.sh")
(cd "$tour" && unset MEMPLAY_DB && bash "$T/tour.sh") || fail "the README's tour failed (above)"
[ -f "$tour/memplay.db" ] || fail "the tour left no ./memplay.db"
echo "ran $ncmds commands of $(basename "$readme")"
finish
