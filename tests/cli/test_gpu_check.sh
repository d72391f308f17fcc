# tools/gpu-check.sh on a machine without a GPU: it says so, exits 1, and builds nothing.
. "$TESTS_DIR/cli/lib.sh"

# No driver: nvidia-smi is not on the PATH (a PATH of the shell's own tools only).
mkdir -p "$T/bin" "$T/work"
for t in bash cat date dirname grep mkdir; do ln -s "$(command -v "$t")" "$T/bin/$t"; done
PATH="$T/bin" bash "$MEMPLAY_SRC/tools/gpu-check.sh" "$T/work/out" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 1 ] || fail "gpu-check.sh without nvidia-smi exited $rc, wanted 1"
has "$T/err" "no NVIDIA driver on this machine"
has "$T/err" "nothing was run"
[ -e "$T/work/out" ] && fail "gpu-check.sh without a GPU made its output folder"

# A driver that lists no GPU.
printf '#!/bin/sh\necho "No devices were found"\nexit 6\n' >"$T/bin/nvidia-smi"
chmod +x "$T/bin/nvidia-smi"
PATH="$T/bin" CUDA_VISIBLE_DEVICES= bash "$MEMPLAY_SRC/tools/gpu-check.sh" "$T/work/out" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 1 ] || fail "gpu-check.sh with no GPU listed exited $rc, wanted 1"
has "$T/err" "no NVIDIA GPU is visible"
has "$T/err" "CUDA_VISIBLE_DEVICES=''"
[ -e "$T/work/out" ] && fail "gpu-check.sh without a GPU made its output folder"
finish
