#!/usr/bin/env bash
# Installs the Debian packages memplay needs to build and test, when they are missing.
# Run as root (or with sudo available). The CUDA toolkit is optional and not installed here.
set -euo pipefail

packages=(build-essential cmake pkg-config libsqlite3-dev sqlite3 liblua5.4-dev libyajl-dev zlib1g-dev libbsd-dev
          libisal-dev # ISA-L: the store's chunk checksums and a file's digest (CRC-32, Adler-32) several times faster than zlib's; the build falls back to zlib without it
          parallel python3) # GNU parallel and python3: the sharded-sweep and pseudo-terminal checks of tests/cli/test_compare.sh
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "memplay: installing ${missing[*]}" >&2
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Headless Chromium, for the test that opens the pictures (plots) in a browser. Optional: where it
# cannot be installed, that test says so and is skipped.
if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "memplay: installing chromium (for the browser test of the pictures)" >&2
  if ! { $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends \
    chromium; } >/dev/null 2>&1; then
    echo "memplay: chromium could not be installed: the browser test of the pictures will be skipped" >&2
  fi
fi
