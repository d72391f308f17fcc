#!/usr/bin/env bash
# The pictures as a user sees them: `memplay plot` SVG and HTML of the bundled sample opened in
# headless Chromium; the page loads without console errors, what is drawn is what the replay says
# (a path per series, the peak's value, one rect per segment at the peak, the legend), the page's
# script ran (zoom transform, axis redrawn, hover details attached), and the screenshots are not
# blank. Skips (exit 77) when no Chromium is installed (tools/deps.sh installs Debian's).
. "${TESTS_DIR:?}/cli/lib.sh"
: "${PNG_STATS:?the png_stats helper (set by CTest)}"

browser=""
for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then browser=$(command -v "$b") && break; fi
done
if [ -z "$browser" ]; then
  echo "SKIPPED: no headless Chromium found (install Debian's 'chromium', as tools/deps.sh does): the SVG and HTML" \
    "pictures were NOT checked in a browser"
  exit 77
fi

# render FILE: the DOM after the page's scripts ran into FILE.dom, the console into FILE.log,
# a screenshot into FILE.png
render() {
  local f=$1 h=${2:-1400}
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$T/profile" \
    --enable-logging=stderr --v=0 --dump-dom "file://$f" >"$f.dom" 2>"$f.log"
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --user-data-dir="$T/profile" \
    --window-size=1140,"$h" --screenshot="$f.png" "file://$f" >/dev/null 2>>"$f.log"
  if grep -q ':CONSOLE' "$f.log"; then fail "$(basename "$f"): console messages: $(grep ':CONSOLE' "$f.log" | head -3)"; fi
  [ -s "$f.dom" ] || fail "$(basename "$f"): the browser rendered nothing: $(tail -3 "$f.log")"
  [ -s "$f.png" ] || fail "$(basename "$f"): no screenshot: $(tail -3 "$f.log")"
}

# count FILE PATTERN: how many times PATTERN occurs in FILE
count() { grep -o -- "$2" "$1" | wc -l; }

# not_blank FILE.png: at least 5% of the pixels differ from the background, in more than 8 colours
not_blank() {
  local stats
  stats=$("$PNG_STATS" "$1") || { fail "cannot read $1"; return; }
  read -r w h share colours <<<"$stats"
  awk -v s="$share" -v c="$colours" 'BEGIN { exit !(s > 0.05 && c > 8) }' ||
    fail "$(basename "$1") looks blank: ${w}x$h, $share of the pixels drawn, $colours colours"
}

expect 0 import "$MEMPLAY_SRC/traces/sample.jsonl" --name sample
expect 0 replay sample --allocator torch --no-save --json
torch_peak=$(json_get peak_allocated_bytes)
expect 0 replay sample --allocator bfc --no-save --json
bfc_peak=$(json_get peak_allocated_bytes)
expect 0 replay sample --allocator torch --at peak --json
torch_segments=$(grep -o '"blocks":' "$T/out" | wc -l)
expect 0 replay sample --allocator bfc --at peak --json
bfc_segments=$(grep -o '"blocks":' "$T/out" | wc -l)
[ "$torch_segments" -gt 10 ] || fail "torch at the peak: $torch_segments segments"

# HTML: two runs overlaid, their segment maps at the peak side by side
H="$T/two.html"
expect 0 plot sample --allocator torch --allocator bfc --capacity 24GiB --at peak -o "$H"
render "$H"
D="$H.dom"
[ "$(count "$D" 'class="series"')" = 4 ] || fail "html: $(count "$D" 'class="series"') series paths, wanted 4"
has "$D" "data-bytes=\"$torch_peak\""
has "$D" "data-bytes=\"$bfc_peak\""
[ "$(count "$D" 'class="segment"')" = $((torch_segments + bfc_segments)) ] ||
  fail "html: $(count "$D" 'class="segment"') segment rects, wanted $torch_segments + $bfc_segments"
for item in 'torch allocated' 'torch reserved' 'bfc allocated' 'bfc reserved' 'capacity 24.00 GiB' parameter activation; do
  has "$D" ">$item</text>"
done
has "$D" 'class="zoom" transform="translate('   # the script drew the zoom transform
has "$D" 'class="x-tick"'
has "$D" 'data-tip="allocated'                  # hover details attached to the blocks
has "$D" 'model.py:41 Model.__init__'          # with their call sites' frames
has "$D" 'class="largest-free"'
not_blank "$H.png"

# the page used as a user would: two wheel turns over the chart zoom the time axis (the curves'
# transform scales by 1.25 twice, the ticks are redrawn), the pointer over the chart shows each
# run's memory there, and over a block its details with its call site
P="$T/probe.html"
grep -v -e '^</body>$' -e '^</html>$' "$H" >"$P"
cat >>"$P" <<'PROBE'
<script>(function(){
var g=document.querySelector("g.chart"),svg=g.ownerSVGElement,r=svg.getBoundingClientRect();
var k=r.width/svg.viewBox.baseVal.width,x=r.left+(+g.dataset.left+ +g.dataset.width*0.7)*k,
    y=r.top+(+g.dataset.top+ +g.dataset.height/2)*k;
for(var i=0;i<2;i++)svg.dispatchEvent(new WheelEvent("wheel",{clientX:x,clientY:y,deltaY:-100,bubbles:true,cancelable:true}));
svg.dispatchEvent(new MouseEvent("mousemove",{clientX:x,clientY:y,bubbles:true}));
var out=document.createElement("pre");out.id="probe";
out.textContent="zoom="+g.querySelector("g.zoom").getAttribute("transform")+"\ncurves="+document.getElementById("tip").textContent;
var b=document.querySelector("rect.block[data-s]"),br=b.getBoundingClientRect();
b.dispatchEvent(new MouseEvent("mousemove",{clientX:br.left+1,clientY:br.top+1,bubbles:true}));
out.textContent+="\nblock="+document.getElementById("tip").textContent;document.body.appendChild(out);})();</script>
</body></html>
PROBE
render "$P"
has "$P.dom" 'zoom=translate('
has "$P.dom" 'scale(1.5625,1)'
has "$P.dom" 'torch: allocated '
has "$P.dom" 'bfc: allocated '
has "$P.dom" 'block=allocated '
has "$P.dom" 'model.py:41 Model.__init__'

# SVG: one run; the same checks without the script
S="$T/one.svg"
expect 0 plot sample --allocator torch --at peak -o "$S"
render "$S"
D="$S.dom"
[ "$(count "$D" 'class="series"')" = 2 ] || fail "svg: $(count "$D" 'class="series"') series paths, wanted 2"
[ "$(count "$D" 'class="segment"')" = "$torch_segments" ] ||
  fail "svg: $(count "$D" 'class="segment"') segment rects, wanted $torch_segments"
has "$D" "data-bytes=\"$torch_peak\""
label=$(grep -o 'class="peak-label"[^>]*>[^<]*' "$D" | sed 's/.*>//')
expect 0 replay sample --allocator torch --at peak
want=$(sed -n 's/^  allocated \([0-9.]* [KMGT]iB\),.*/\1/p' "$T/out")
[ "$label" = "peak $want" ] || fail "svg: peak label '$label', the state at the peak says allocated $want"
has "$D" '>allocated</text>'
has "$D" '>reserved</text>'
not_blank "$S.png"

# an OOM: the request drawn against the free space it could not use
O="$T/oom.html"
expect 0 plot sample --allocator torch --capacity 16GiB --at oom -o "$O"
render "$O"
has "$O.dom" 'class="oom-mark'
has "$O.dom" 'class="request-label"'
expect 0 replay sample --allocator torch --capacity 16GiB --at oom
want=$(sed -n 's/^  OOM: \(needed .*\)$/\1/p' "$T/out")
[ -n "$want" ] || fail "replay --at oom printed no OOM line"
has "$O.dom" ">$want</text>"
not_blank "$O.png"
# `compare --html`: the table (one row per cell, the regressed cell highlighted, as drawn), one
# figure per trace with each policy's curves, one segment-map group per policy at its peak
expect 0 gen --events 1500 --seed 1 --name job1
CP=(compare sample job1 --policy torch --policy bfc --policy 'torch:expandable_segments:True' --no-save --quiet)
expect 0 "${CP[@]}" --json && cp "$T/out" "$T/base.json"
python3 - "$T/base.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
r["cells"][4]["peak_reserved_bytes"] = int(r["cells"][4]["peak_reserved_bytes"] * 0.9)  # sample / bfc
json.dump(r, open(sys.argv[1], "w"))
PY
C="$T/compare.html"
expect 3 "${CP[@]}" --baseline "$T/base.json" --fail-if 'peak_reserved > +2%' --html "$C"
grep -v -e '^</body>$' -e '^</html>$' "$C" >"$C.probe.html"
cat >>"$C.probe.html" <<'PROBE'
<script>(function(){
var out=[],rows=document.querySelectorAll("table.compare tbody tr");out.push("rows="+rows.length);
rows.forEach(function(r){var td=r.querySelector("td.regressed");if(td)out.push("regressed="+r.cells[0].textContent+"/"+
  r.cells[1].textContent+" bg="+getComputedStyle(td).backgroundColor+" plain="+getComputedStyle(r.cells[2]).backgroundColor);});
document.querySelectorAll("div.figure > svg").forEach(function(svg){var ids={};
  svg.querySelectorAll("path.series").forEach(function(p){if(p.getBBox().width>0)ids[p.dataset.series]=1;});
  var maps=[];svg.querySelectorAll("g.segment-map").forEach(function(g){maps.push(g.dataset.segments);});
  out.push("figure="+svg.querySelector(".figure-title").textContent+" curves="+Object.keys(ids).length+" maps="+maps.join(","));});
var pre=document.createElement("pre");pre.id="probe";pre.textContent=out.join("\n");document.body.appendChild(pre);})();</script>
</body></html>
PROBE
render "$C.probe.html" 3000
D="$C.probe.html.dom"
has "$D" 'rows=6'
[ "$(grep -c '^regressed=' "$D")" = 1 ] || fail "compare html: $(grep -c '^regressed=' "$D") rows highlighted, wanted 1"
has "$D" 'regressed=sample/bfc bg=rgb(255, 201, 201) plain=rgb(255, 245, 245)'
expect 0 replay sample --allocator torch:expandable_segments:True --at peak --json
exp_segments=$(grep -o '"blocks":' "$T/out" | wc -l)
has "$D" "figure=job1: 3 policies, segment maps at each peak curves=3 maps="
has "$D" "figure=sample: 3 policies, segment maps at each peak curves=3 maps=$torch_segments,$bfc_segments,$exp_segments"
not_blank "$C.probe.html.png"
finish
