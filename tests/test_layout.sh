#!/usr/bin/env bash
# The layout's rules that the build alone cannot see (docs/architecture.md):
#  1. no quoted include climbs out of its folder with "../" (folders reach each other only
#     through the include paths their libraries' dependencies give them);
#  2. the libraries outside the project are included only where their folder links them:
#     sim/ is the C library's only; SQLite in store/ and import/ (Nsight Systems exports are
#     SQLite files); Lua in lua/; zlib and ISA-L in io/; CUDA and CUPTI in cuda/;
#  3. no allocator model is named by a string outside its own file (a fact about an allocator is
#     a field of its ops table): no "async" comparison outside sim/alloc_async.c.
set -euo pipefail
cd "${MEMPLAY_SRC:?}"
fail=0
bad() { echo "FAIL: $*"; fail=1; }
sources() { git ls-files -- "$@" 2>/dev/null || find "$@" -name '*.[ch]'; }

while IFS= read -r hit; do bad "include climbs out of its folder: $hit"; done < <(
  sources 'sim/*.[ch]' 'replay/*.[ch]' 'cli/*.[ch]' | xargs grep -n '#include "\.\./' || true)

# allowed FOLDER-REGEX for each outside header pattern
check_lib() {
  local header=$1 allowed=$2
  while IFS= read -r hit; do
    file=${hit%%:*}
    [[ $file =~ $allowed ]] || bad "$header is included outside $allowed: $hit"
  done < <(sources 'sim/*.[ch]' 'replay/*.[ch]' | xargs grep -nE "#include <$header" || true)
}
check_lib 'sqlite3\.h' '^replay/(store|import)/'
check_lib '(lua|lauxlib|lualib)\.h' '^replay/lua/'
check_lib 'zlib\.h' '^replay/io/'
check_lib 'isa-l' '^replay/io/'
check_lib '(cuda|cupti|cuda_runtime|cuda_runtime_api)[a-z_]*\.h' '^replay/cuda/'
check_lib 'yajl/' '^replay/'
while IFS= read -r hit; do
  bad "sim/ uses only the C library and POSIX: $hit"
done < <(sources 'sim/*.[ch]' | xargs grep -nE '#include <(sqlite3|yajl|lua|lauxlib|zlib|isa-l|cuda|cupti)' || true)

while IFS= read -r hit; do bad "an allocator named by a string outside its own file: $hit"; done < <(
  sources 'sim/*.[ch]' 'replay/*.[ch]' 'cli/*.[ch]' | grep -v '^sim/alloc_async.c$' |
    xargs grep -nE 'strn?cmp\([^;]*"async"' || true)

[ $fail = 0 ] && echo "ok: layout"
exit $fail
