#!/usr/bin/env bash
# Configures and builds dsa into ${DSA_BUILD_DIR:-build}. Extra arguments go to cmake.
# CUDA is built when nvcc is present (DSA_CUDA=AUTO), for ${DSA_CUDA_ARCHS:-90a;120a}.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${DSA_BUILD_DIR:-build}
jobs=${DSA_JOBS:-$(nproc)}
if [ -z "${CUDACXX:-}" ] && ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi
# ccache keys on relative paths below the checkout, so clones elsewhere (CI) reuse the cache.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=${DSA_BUILD_TYPE:-Release} \
  -DDSA_CUDA_ARCHS="${DSA_CUDA_ARCHS:-90a;120a}" -DDSA_CUDA="${DSA_CUDA:-AUTO}" "$@" >"$build.configure.log" 2>&1 \
  || { cat "$build.configure.log"; exit 1; }
grep -E "^-- dsa " "$build.configure.log" || true
cmake --build "$build" -j "$jobs"
