#!/usr/bin/env bash
# test_devices.sh: `memplay devices`: list, show, edit, create, reset, delete, and its errors.
set -u
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
db="$tmp/store.db"
mp() { "$MEMPLAY" --db "$db" "$@"; }

# -h: usage on stdout, nothing on stderr
mp devices -h >"$tmp/out" 2>"$tmp/err" || fail "devices -h failed"
grep -q "^usage: memplay devices" "$tmp/out" || fail "devices -h prints no usage"
[ -s "$tmp/err" ] && fail "devices -h wrote to stderr"

# list: every built-in, in the store
mp devices >"$tmp/out" || fail "devices (list) failed"
for n in V100-16GB V100-32GB A100-40GB A100-80GB H100 H200 L4 T4 RTX3090 RTX4090; do
  grep -q "^$n " "$tmp/out" || fail "list lacks $n"
done
[ "$(sqlite3 "$db" "SELECT count(*) FROM device_profiles WHERE source = 'builtin'")" = 10 ] ||
  fail "the built-ins are not in the store's device_profiles table"
mp devices --json >"$tmp/out" || fail "devices --json failed"
grep -q '"devices":\[' "$tmp/out" || fail "devices --json has no devices array"
grep -q '"name":"H200","source":"builtin"' "$tmp/out" || fail "devices --json lacks H200"

# show: every figure with its unit
mp devices A100-80GB >"$tmp/out" || fail "show failed"
grep -q "h2d_pinned_bw    25.13 GB/s" "$tmp/out" || fail "show lacks the pinned bandwidth: $(cat "$tmp/out")"
grep -q "copy_engines     3" "$tmp/out" || fail "show lacks the copy engines"
mp devices a100-80gb --json >"$tmp/out" || fail "show by any case failed"
grep -q '"total_memory":85100068864' "$tmp/out" || fail "show --json lacks total_memory: $(cat "$tmp/out")"

# edit a built-in: it becomes a user profile; --reset gives it back
mp devices T4 --set h2d_pinned_bw=8GB/s --set h2d_pageable_bw=4GB/s >"$tmp/out" || fail "edit failed"
grep -q "updated device profile 'T4' (user)" "$tmp/out" || fail "edit did not say so: $(cat "$tmp/out")"
mp devices T4 | grep -q "h2d_pinned_bw    8.00 GB/s" || fail "edit not kept"
mp devices | grep -q "^T4 *user " || fail "an edited built-in is not listed as user"
mp devices T4 --reset >/dev/null || fail "reset failed"
mp devices T4 | grep -q "h2d_pinned_bw    9.70 GB/s" || fail "reset did not restore the figure"

# create from a base, then delete
mp devices my-gpu --from A100-80GB --set mem_bw=1TB/s --set "description=our lab card" >"$tmp/out" ||
  fail "create failed"
grep -q "created device profile 'my-gpu' (user)" "$tmp/out" || fail "create did not say so"
mp devices my-gpu --json | grep -q '"mem_bw":1e+12\|"mem_bw":1000000000000' || fail "created profile lacks mem_bw"
mp devices | grep -q "^my-gpu *user .*our lab card" || fail "created profile not listed"
mp devices my-gpu --delete >"$tmp/out" || fail "delete failed"
grep -q "deleted device profile 'my-gpu'" "$tmp/out" || fail "delete did not say so"
mp devices | grep -q "^my-gpu" && fail "deleted profile still listed"

# --fields
mp devices --fields >"$tmp/out" || fail "--fields failed"
grep -q "^malloc_per_gib *ns/GiB" "$tmp/out" || fail "--fields lacks malloc_per_gib"

# errors: exit 1 for what the store lacks or refuses, 2 for usage
expect() {
  local code=$1 msg=$2
  shift 2
  mp "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  [ "$rc" = "$code" ] || fail "'$*' exited $rc, not $code: $(cat "$tmp/err")"
  grep -q -- "$msg" "$tmp/err" || fail "'$*' said: $(cat "$tmp/err")"
}
expect 1 "no device profile 'nope'" devices nope
expect 1 "no device profile 'nope'" devices nope --set mem_bw=1TB/s
expect 2 "'h2d_pinned_bw' wants a rate" devices T4 --set h2d_pinned_bw=fast
expect 2 "unknown device field 'warp'" devices T4 --set warp=9
expect 2 "--set wants KEY=VALUE" devices T4 --set mem_bw
expect 1 "cannot delete the built-in device profile 'H100'" devices H100 --delete
expect 1 "already exists" devices L4 --from T4
expect 1 "no device profile 'ghost' to copy" devices new --from ghost
expect 2 "exclude each other" devices T4 --delete --reset
expect 2 "name the device profile" devices --set mem_bw=1TB/s
expect 2 "not a valid profile name" devices "bad name"
expect 1 "pageable bandwidth cannot exceed" devices T4 --set h2d_pinned_bw=1GB/s
expect 1 "not a built-in" devices nothing-here --reset
# a refused edit leaves the profile as it was
mp devices T4 | grep -q "h2d_pinned_bw    9.70 GB/s" || fail "a refused edit changed the profile"
exit 0
