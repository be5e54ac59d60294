#!/usr/bin/env bash
# The main job: builds dsa and shows what it does today on this machine: `dsa info` and, for
# each built-in model, which attention backend `dsa select` picks.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh >/dev/null
dsa=${DSA_BUILD_DIR:-build}/apps/dsa/dsa
"$dsa" info
for m in deepseek-v4-flash deepseek-v4-pro glm-5.1; do
  echo
  "$dsa" select --model "$m" "$@"
done
