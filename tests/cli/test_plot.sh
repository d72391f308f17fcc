#!/usr/bin/env bash
# `replay --at`, `plot` and `export --format perfetto|csv` as a user runs them: the moments, the
# formats, and bad input (a moment that never comes, an unknown format, an output path that is a
# directory or unwritable): a clear error, exit 1 or 2, nothing left; a link or a FIFO is written through.
. "$TESTS_DIR/cli/lib.sh"

expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name sample

# the state at a moment
expect 0 replay sample --allocator torch --at peak
has "$T/out" "at the peak of allocated memory, event"
has "$T/out" "fragmentation: internal"
has "$T/out" "large pool:"
expect 0 replay sample --allocator torch --capacity 16GiB --at oom
has "$T/out" "OOM: needed"
has "$T/out" "CUDA out of memory"
expect 0 replay sample --allocator bfc --at 2000 --json
has "$T/out" '"at":"event"'
has "$T/out" '"event":2000'
has "$T/out" '"segments":[{'
expect 0 replay sample --allocator async --at 250ms
has "$T/out" "state of 'sample' under async"
expect 0 replay sample --allocator ideal --at peak
has "$T/out" "keeps no segments"
expect 2 replay sample --at oom
has "$T/err" "no allocation ran out of memory"
expect 2 replay sample --at 4000
has "$T/err" "past the trace's end"
expect 2 replay sample --at 1h
has "$T/err" "past the trace's end"
expect 2 replay sample --at soon
has "$T/err" "is not a moment"
expect 2 replay sample --at peak --timeline
# a trace that allocates no device memory has no peak: the same moment that never comes, for both
printf '%s\n' '{"memplay":1,"name":"nopeak","source_format":"generated"}' \
  '{"kind":"kernel","ts":0,"dev_ts":1000,"api_dur":500,"dur":2000,"stream":0}' \
  '{"kind":"memcpy","ts":5000,"dev_ts":6000,"api_dur":500,"dur":1000,"stream":0,"size":4096,"dir":"h2d","mem":"pinned"}' \
  >"$T/nopeak.jsonl"
expect 0 import "$T/nopeak.jsonl" --name nopeak
expect 2 replay nopeak --at peak
has "$T/err" "allocates no device memory: it has no peak"
expect 2 plot nopeak -o "$T/nopeak.svg" --at peak
has "$T/err" "allocates no device memory: it has no peak"
[ ! -e "$T/nopeak.svg" ] || fail "a plot of a moment that never comes was written"

# plot: formats and outputs
expect 0 plot sample -o "$T/a.svg"
expect 0 plot sample -o "$T/a.svg" --allocator bfc --at peak --json
has "$T/out" '"format":"svg"'
has "$T/out" '"at":"peak"'
has "$T/a.svg" '<svg xmlns="http://www.w3.org/2000/svg"'
expect 0 plot sample --allocator torch --allocator 'torch:expandable_segments:True' -o "$T/b.html" --at peak
has "$T/b.html" 'torch:expandable_segments:True allocated'
if grep -qE '(src|href)="https?:' "$T/b.html"; then fail "the page loads something from the network"; fi
expect 2 plot sample -o "$T/c.png"
has "$T/err" "cannot tell the format"
expect 2 plot sample -o "$T/c.svg" --format pdf
has "$T/err" "unknown format 'pdf'"
expect 2 plot sample
expect 2 plot sample -o "$T/c.svg" --at later
mkdir "$T/dir" "$T/dir.svg"
expect 1 plot sample -o "$T/dir.svg"
has "$T/err" "it is a directory"
# a symbolic link is followed to its target and stays a link; a FIFO is written directly, never replaced
echo keep >"$T/target.svg"
ln -s "$T/target.svg" "$T/link.svg"
expect 0 plot sample -o "$T/link.svg"
[ -L "$T/link.svg" ] || fail "the link was replaced"
has "$T/target.svg" 'class="peak-label"'
mkfifo "$T/fifo.svg"
cat "$T/fifo.svg" >"$T/from-fifo.svg" &
reader=$!
expect 0 plot sample -o "$T/fifo.svg"
wait "$reader"
[ -p "$T/fifo.svg" ] || fail "the FIFO was replaced"
has "$T/from-fifo.svg" 'class="peak-label"'
expect 1 plot sample -o "$T/missing/x.svg"
expect 2 plot sample -o "$T/none.html" --at oom
has "$T/err" "no allocation ran out of memory"
[ ! -e "$T/none.html" ] || fail "a failed plot left $T/none.html"
leftovers=$(find "$T" -name '*.tmp*' | wc -l)
[ "$leftovers" = 0 ] || fail "temporary files left: $(find "$T" -name '*.tmp*')"

# whatif --plot: the variants overlaid; memplay.plot from a script, into --out
MEMPLAY_SCRIPTS="$MEMPLAY_SRC/scripts" expect 0 whatif sample batch_size --plot "$T/w.svg" --no-save
has "$T/w.svg" 'class="peak-label"'
[ "$(grep -o 'class="series"' "$T/w.svg" | wc -l)" = 4 ] || fail "whatif --plot: not two variants' curves"
MEMPLAY_SCRIPTS="$MEMPLAY_SRC/scripts" expect 2 whatif sample batch_size --plot "$T/w.pdf"
cat >"$T/p.lua" <<'LUA'
local t = memplay.store():trace('sample')
local a, b = t:replay{allocator = 'torch'}, t:replay{allocator = 'bfc'}
memplay.plot{file = 'both.html', results = {a, b}, labels = {'torch', 'bfc'}, title = 'two allocators'}
memplay.plot{file = 'one.svg', results = {a}}
LUA
expect 0 run --out "$T/outdir" --no-save "$T/p.lua"
has "$T/outdir/both.html" '>torch allocated</text>'
has "$T/outdir/both.html" '>bfc reserved</text>'
has "$T/outdir/one.svg" 'class="peak-label"'
echo "memplay.plot{file = 'x.png', results = {}}" >"$T/bad.lua"
expect 1 run --out "$T/out2" "$T/bad.lua"
has "$T/err" "must end in .svg or .html"

# export: Perfetto and CSV of a trace and of a stored run
expect 0 export sample --format perfetto -o "$T/p.json" --allocator torch --capacity 16GiB
has "$T/p.json" '"traceEvents":['
has "$T/p.json" '"name":"thread_name","args":{"name":"stream 0"}'
has "$T/p.json" '"cat":"oom","name":"OOM '
has "$T/p.json" '"name":"memory","args":{"allocated":'
# times as "%.3f" writes them, formatted without floating point: before the first event (a device
# clock behind the host's), durations, and past 2^52 ns, where printf's own rounding is kept
printf '%s\n' '{"kind":"alloc","ts":1000000,"addr":1,"size":4096}' \
  '{"kind":"kernel","ts":1000100,"dev_ts":5,"name":"early\"q\\\t","dur":1234567}' \
  '{"kind":"kernel","ts":1000200,"dev_ts":999999,"name":"justbefore","dur":1}' \
  '{"kind":"kernel","ts":1000300,"dev_ts":1700000000123456789,"name":"epoch","dur":3}' \
  '{"kind":"free","ts":1000600,"addr":1}' >"$T/times.jsonl"
expect 0 import "$T/times.jsonl"
expect 0 export times --format perfetto -o "$T/t.json"
has "$T/t.json" '"ts":-999.995,"dur":1234.567,"cat":"kernel","name":"early\"q\\\u0009"'
has "$T/t.json" '"ts":-0.001,"dur":0.001,'
has "$T/t.json" '"ts":1700000000122456.750,"dur":0.003,'
has "$T/t.json" '"ts":0.600,"name":"memory"'
expect 0 export sample --format csv --allocator bfc
has "$T/out" "event,time_s,allocated,reserved,unknown,parameter"
expect 3 replay sample --allocator torch --capacity 16GiB --json
run=$(json_get run_id)
expect 0 export "run:$run" --format perfetto -o "$T/r.json"
has "$T/r.json" '"cat":"oom"'
has "$T/r.json" '"cat":"kernel"'
expect 0 export "run:$run" --format csv
has "$T/out" "event,time_s,allocated,reserved"
expect 1 export run:99999 --format csv
has "$T/err" "there is no run 99999"
# a lean replay's run (a script's t:replay{lean = true}) kept no timeline: refused, with why
printf 'memplay.variant("lean", memplay.store():trace("sample"):replay{allocator = "torch", lean = true})\n' >"$T/lean.lua"
expect 0 run "$T/lean.lua"
lean_run=$(sqlite3 "$DB" "SELECT max(id) FROM runs")
expect 1 export "run:$lean_run" --format csv
has "$T/err" "run $lean_run was a lean replay: it kept no timeline to export"
expect 2 export "run:$run" --format jsonl
expect 2 export run:x --format csv
expect 2 export sample --format svg
has "$T/err" "unknown format 'svg'"
expect 2 export sample --format jsonl --allocator torch
expect 1 export sample --format perfetto -o "$T/dir"
has "$T/err" "it is a directory"
finish
