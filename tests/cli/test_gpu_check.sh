# tools/gpu-check.sh on a machine without a GPU: it says so, exits 1, and builds nothing; with a
# GPU, a --bundle that is not one is refused before anything runs.
. "$TESTS_DIR/cli/lib.sh"

# No driver: nvidia-smi is not on the PATH (a PATH of the shell's own tools only).
mkdir -p "$T/bin" "$T/work"
for t in bash cat cp date dirname grep mkdir rm; do ln -s "$(command -v "$t")" "$T/bin/$t"; done
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

# A GPU, and a bundle that is not one, or none named.
printf '#!/bin/sh\necho "GPU 0: Pretend GPU (UUID: GPU-0)"\n' >"$T/bin/nvidia-smi"
mkdir -p "$T/traces/pytorch" "$T/notabundle"
for t in kk_ctx128_fullstep wed_medium_256_training niu_ctx150_fwdbwd_fp32; do : >"$T/traces/pytorch/$t.pickle"; done
PATH="$T/bin" MEMPLAY_TRACES="$T/traces" bash "$MEMPLAY_SRC/tools/gpu-check.sh" --bundle "$T/notabundle" "$T/work/out" >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 1 ] || fail "gpu-check.sh --bundle of a folder without memplay exited $rc, wanted 1"
has "$T/err" "is not a bundle: it has no bin/memplay"
PATH="$T/bin" bash "$MEMPLAY_SRC/tools/gpu-check.sh" --bundle >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 2 ] || fail "gpu-check.sh --bundle without a folder exited $rc, wanted 2"
has "$T/err" "usage: tools/gpu-check.sh [--bundle DIR] [OUT]"

# tools/gpu_checks_addresses.sh (gpu_checks.sh's step 8) without a GPU: a snapshot it finds is
# imported, one it finds nowhere is named and left out, and each replay fails saying why.
mkdir -p "$T/bundle/bin" "$T/bundle/traces" "$T/none"
ln -s "$MEMPLAY" "$T/bundle/bin/memplay"
# (any trace serves: the import reads what a file holds, whatever its name)
cp "$MEMPLAY_SRC/traces/sample.jsonl" "$T/bundle/traces/kk_ctx128_fullstep.pickle"
(cd "$MEMPLAY_SRC" && MEMPLAY_TRACES="$T/none" tools/gpu_checks_addresses.sh "$T/bundle" "$T/addr") >"$T/out" 2>"$T/err"
rc=$?
[ "$rc" = 1 ] || fail "gpu_checks_addresses.sh without a GPU exited $rc, wanted 1"
grep -q '^import_kk_ctx128_fullstep *rc=0 ' "$T/out" || fail "the snapshot in the bundle was not imported: $(head -3 "$T/out")"
has "$T/out" "wed_medium_256_training: not in $T/bundle/traces nor in $T/none/pytorch: its replays are left out"
has "$T/out" "kk_ctx512_fullstep: not in"
grep -q '^gpu_kk_ctx128_fullstep_torch_44GiB *rc=1 ' "$T/out" || fail "no replay of the snapshot was tried"
grep -q 'gpu_wed' "$T/out" && fail "a snapshot left out was replayed"
has "$T/addr/gpu_kk_ctx128_fullstep_torch_44GiB.err" "cannot replay on a GPU"
finish
