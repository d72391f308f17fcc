#!/usr/bin/env bash
# gpu_bundle.sh BUILD DIR: copies a CUDA-enabled build (memplay, the recorder, the test program
# it records) and the shared libraries they load that a GPU machine may lack (SQLite, yajl,
# Lua, zlib, CUPTI, the sqlite3 shell) into DIR/bin and DIR/lib, so that tools/gpu_checks.sh
# can run them on a machine where memplay's build dependencies are not installed.
set -euo pipefail
build=${1:?usage: tools/gpu_bundle.sh BUILD DIR}
dir=${2:?usage: tools/gpu_bundle.sh BUILD DIR}
for f in memplay libmemplay_recorder.so tests/gpu_record_target; do
  [ -e "$build/$f" ] || { echo "error: '$build/$f' is missing: build with the CUDA toolkit first" >&2; exit 1; }
done
rm -rf "$dir"
mkdir -p "$dir/bin" "$dir/lib"
cp "$build/memplay" "$build/libmemplay_recorder.so" "$build/tests/gpu_record_target" "$dir/bin/"
cp "$(command -v sqlite3)" "$dir/bin/"
# Every library the programs load, but the C library and the loader themselves.
for exe in "$dir"/bin/*; do
  ldd "$exe" | awk '/=> \// { print $3 }'
done | sort -u | while read -r lib; do
  case "$(basename "$lib")" in
  libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | librt.so.* | libutil.so.* | libgcc_s.so.* | ld-linux*) ;;
  *) cp -L "$lib" "$dir/lib/" ;;
  esac
done
echo "bundled into $dir: $(ls "$dir/bin" | tr '\n' ' ')"
echo "libraries: $(ls "$dir/lib" | tr '\n' ' ')"
