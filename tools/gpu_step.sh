# gpu_step.sh: what tools/gpu_checks.sh and tools/gpu_checks_jax.sh share (sourced).

# bundle_env USAGE BUNDLE OUT: B the bundle (tools/gpu_bundle.sh) and O the output folder, made,
# both absolute; M the bundle's memplay, and the bundle's programs and libraries found first.
bundle_env() {
  B=$(cd "${2:?$1}" && pwd) || exit 2
  O=${3:?$1}
  mkdir -p "$O" && O=$(cd "$O" && pwd) || exit 1
  export PATH="$B/bin:$PATH" LD_LIBRARY_PATH="$B/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  M="$B/bin/memplay"
}

# The callers set failed=0 before the first step.
# step NAME LIMIT_S COMMAND...: runs COMMAND within LIMIT_S seconds, its output in O/NAME.out and
# .err; prints its exit status and time; a failure sets failed=1 and shows the end of its errors.
step() {
  local name=$1 limit=$2 t0 rc
  shift 2
  t0=$(date +%s%N)
  timeout "$limit" "$@" >"$O/$name.out" 2>"$O/$name.err"
  rc=$?
  printf '%-34s rc=%-3s %6d ms\n' "$name" "$rc" $((($(date +%s%N) - t0) / 1000000))
  if [ "$rc" != 0 ]; then
    failed=1
    tail -n 5 "$O/$name.err" | sed 's/^/    /'
  fi
  return "$rc"
}
