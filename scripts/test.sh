#!/usr/bin/env bash
# The test command: installs dependencies, builds everything (CUDA sources too when nvcc is
# present, so that a compile error cannot land), runs every test with ctest. GPU tests skip
# and say so when there is no GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
ctest --test-dir "${DSA_BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
