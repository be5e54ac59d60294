#!/usr/bin/env bash
# Installs the build and test dependencies from Debian packages. Idempotent and quick when all
# is present; does nothing where apt-get is unavailable (e.g. the GPU machine, which ships them).
# Optional packages (PCRE2 for the tokenizer, cpp-httplib for the server) only warn when they
# cannot be installed: CMake then leaves those parts out and says so.
set -euo pipefail
required=(cmake ninja-build g++ ccache nlohmann-json3-dev libcli11-dev libfmt-dev libgtest-dev googletest python3)
optional=(libpcre2-dev libcpp-httplib-dev)
# --fuzz: the fuzz build's compiler and sanitizer runtimes (scripts/fuzz.sh), required then.
if [ "${1:-}" = "--fuzz" ]; then
  required=(cmake ninja-build ccache clang libclang-rt-dev nlohmann-json3-dev libfmt-dev libpcre2-dev)
  optional=()
fi
missing_of() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}
mapfile -t missing < <(missing_of "${required[@]}" "${optional[@]+"${optional[@]}"}")
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
install() { DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null; }
mapfile -t need < <(missing_of "${required[@]}")
[ ${#need[@]} -eq 0 ] || install "${need[@]}"
for p in $(missing_of "${optional[@]+"${optional[@]}"}"); do
  install "$p" || echo "install-deps: optional package $p could not be installed; building without it" >&2
done
