#!/usr/bin/env bash
# gpu-check.sh [--bundle DIR] [OUT]: the one command for a machine with an NVIDIA GPU (docs/gpu.md,
# "Checking a GPU"): builds memplay with CUDA, bundles it (tools/gpu_bundle.sh), runs
# tools/gpu_checks.sh on three shared traces (replays through the `cuda` backend, predicted against
# measured; a calibration into a profile; a small CUDA program recorded and imported; the GPU
# test), and writes a summary. Everything lands under OUT (default gpu-check-DATE): build.log,
# bundle/, results/ (each step's output, the store gpu.db), checks.log, summary.txt.
# With --bundle DIR it builds nothing and runs the build tools/gpu_bundle.sh put in DIR on another
# machine: for a GPU machine where memplay's build dependencies cannot be installed.
# Run from anywhere inside the source tree. MEMPLAY_TRACES: the shared traces' folder (default
# ../shared/traces beside the checkout). MEMPLAY_GPU_TORCH=1 adds the PyTorch jobs of
# gpu_checks.sh (they need PyTorch and take longer than the 8 minutes this command keeps to).
# Exit status: 0 when every step passed in time; 1 when there is no GPU, a step failed, or the
# whole run took longer than 8 minutes.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
budget=480
start=$(date +%s)
bundle=
if [ "${1:-}" = --bundle ]; then
  [ -n "${2:-}" ] || { echo "usage: tools/gpu-check.sh [--bundle DIR] [OUT]" >&2; exit 2; }
  bundle=$(cd "$2" 2>/dev/null && pwd) || { echo "error: no bundle folder '$2'" >&2; exit 1; }
  shift 2
fi
O=${1:-gpu-check-$(date -u +%Y%m%d-%H%M%S)}
traces=${MEMPLAY_TRACES:-$root/../shared/traces}
elapsed() { echo $(($(date +%s) - start)); }
fail() {
  echo "error: $*" >&2
  exit 1
}

# 0. A GPU, before anything is built.
command -v nvidia-smi >/dev/null 2>&1 ||
  fail "no NVIDIA driver on this machine (nvidia-smi is not on the PATH): tools/gpu-check.sh needs an NVIDIA GPU; nothing was run"
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
[ "$gpus" -gt 0 ] ||
  fail "no NVIDIA GPU is visible (nvidia-smi -L lists none${CUDA_VISIBLE_DEVICES+, CUDA_VISIBLE_DEVICES='$CUDA_VISIBLE_DEVICES'}): tools/gpu-check.sh needs one; nothing was run"
for t in kk_ctx128_fullstep wed_medium_256_training niu_ctx150_fwdbwd_fp32; do
  [ -e "$traces/pytorch/$t.pickle" ] || fail "the shared trace '$traces/pytorch/$t.pickle' is missing: set MEMPLAY_TRACES to the shared traces' folder"
done
if [ -n "$bundle" ]; then # the bundle, or what the build needs, before anything is made
  [ -x "$bundle/bin/memplay" ] || fail "'$bundle' is not a bundle: it has no bin/memplay (make one with tools/gpu_bundle.sh)"
else
  missing=
  for h in sqlite3.h lua5.4/lua.h yajl/yajl_parse.h zlib.h; do
    [ -e "/usr/include/$h" ] || missing="$missing $h"
  done
  [ -z "$missing" ] ||
    fail "memplay's build dependencies are missing here (no$missing in /usr/include): install them (tools/deps.sh), or build and bundle memplay on another machine (tools/gpu_bundle.sh BUILD DIR) and run tools/gpu-check.sh --bundle DIR"
fi
mkdir -p "$O" && O=$(cd "$O" && pwd) || fail "cannot make the output folder '$O'"
echo "gpu-check: $gpus GPU(s); everything goes to $O"

# 1. The build, with the real-GPU parts (a missing CUDA toolkit is an error here), and its bundle;
#    or the bundle given.
if [ -z "$bundle" ]; then
  echo "build ..."
  { cmake -S . -B "$O/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMEMPLAY_CUDA=ON &&
    cmake --build "$O/build" -j"$(nproc)"; } >"$O/build.log" 2>&1 ||
    fail "the build failed: see $O/build.log"
  echo "build: done in $(elapsed) s"
  tools/gpu_bundle.sh "$O/build" "$O/bundle" >"$O/bundle.log" 2>&1 || fail "bundling failed: see $O/bundle.log"
else
  rm -rf "$O/bundle" && cp -r "$bundle" "$O/bundle" || fail "cannot copy the bundle into $O"
fi

# 2. The three traces the bundle replays (and kk_ctx512_fullstep for step 8 of gpu_checks.sh).
mkdir -p "$O/bundle/traces"
for t in kk_ctx128_fullstep wed_medium_256_training niu_ctx150_fwdbwd_fp32; do
  cp "$traces/pytorch/$t.pickle" "$O/bundle/traces/" || fail "cannot copy $t"
done
# and, when at hand, the one gpu_checks_addresses.sh adds (it says so when it is not)
[ -e "$traces/pytorch/kk_ctx512_fullstep.pickle" ] && cp "$traces/pytorch/kk_ctx512_fullstep.pickle" "$O/bundle/traces/"

# 3. The checks, within what is left of the 8 minutes.
left=$((budget - $(elapsed)))
[ "$left" -gt 30 ] || fail "the build took $(elapsed) s of the $budget s: no time is left for the checks"
GPU_CHECKS_TORCH=${MEMPLAY_GPU_TORCH:-0} timeout "$left" tools/gpu_checks.sh "$O/bundle" "$O/results" 2>&1 |
  tee "$O/checks.log"
rc=${PIPESTATUS[0]}
[ "$rc" = 124 ] && echo "error: the checks were stopped at the 8-minute limit" | tee -a "$O/checks.log" >&2

# 4. The summary: each GPU replay's predicted and measured peak and median step.
if command -v python3 >/dev/null 2>&1; then
  python3 - "$O/results" >"$O/summary.txt" <<'EOF'
import glob, json, os, sys
def median_step(steps):
    s = steps[1:] if len(steps) >= 3 else steps
    s = sorted(s)
    return s[len(s) // 2] if s else None
print("%-42s %16s %16s %8s %12s %12s" % ("replay on the GPU", "predicted peak B", "measured peak B", "err %",
                                         "recorded step", "measured step"))
for f in sorted(glob.glob(os.path.join(sys.argv[1], "gpu_*.out"))):
    try:
        d = json.load(open(f))
    except ValueError:
        print("%-42s (no result: see %s)" % (os.path.basename(f)[:-4], os.path.basename(f)[:-4] + ".err"))
        continue
    p, m, r = d.get("predicted", {}), d.get("measured", {}), d.get("recorded", {})
    pp, mp = p.get("device_peak_bytes"), m.get("device_peak_bytes")
    err = "%.3f" % (100.0 * (mp - pp) / pp) if pp and mp is not None else "-"
    rs, ms = median_step(r.get("step_s") or []), median_step(m.get("step_s") or [])
    print("%-42s %16s %16s %8s %12s %12s" % (os.path.basename(f)[4:-4], pp, mp, err,
                                             "%.6f" % rs if rs else "-", "%.6f" % ms if ms else "-"))
EOF
  cat "$O/summary.txt"
fi
total=$(elapsed)
echo "gpu-check: $total s in all; results in $O"
if [ "$total" -gt "$budget" ]; then
  echo "error: the run took $total s, over the $budget s it must keep to" >&2
  exit 1
fi
[ "$rc" = 0 ] || { echo "error: a check failed (see $O/checks.log)" >&2; exit 1; }
exit 0
