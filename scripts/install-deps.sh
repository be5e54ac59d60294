#!/usr/bin/env bash
# Installs the build and test dependencies from Debian packages. Idempotent and quick when all
# is present; does nothing where apt-get is unavailable (e.g. the GPU machine, which ships them).
set -euo pipefail
pkgs=(cmake ninja-build g++ ccache nlohmann-json3-dev libcli11-dev libfmt-dev libgtest-dev googletest libcpp-httplib-dev python3 libpcre2-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "install-deps: missing ${missing[*]} and no apt-get here; continuing with what is installed" >&2
  exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
