#!/usr/bin/env bash
# The main job: builds dsa, shows what it sees on this machine (`dsa info`), which attention
# backend each built-in model gets (`dsa select`), then runs greedy generation. With a checkpoint
# directory as the first argument it generates from that model; with none it makes tiny random
# GLM-5.1 and DeepSeek-V4 checkpoints in the official format (`dsa make-tiny`) and generates
# from those. DSA_DEVICE=cuda runs generation on the GPU (GLM-5.1 only for now).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh >/dev/null
dsa=${DSA_BUILD_DIR:-build}/apps/dsa/dsa
device=${DSA_DEVICE:-cpu}
"$dsa" info
for m in deepseek-v4-flash deepseek-v4-pro glm-5.1; do
  echo
  "$dsa" select --model "$m"
done
echo
if [ $# -gt 0 ]; then
  "$dsa" generate --model "$1" --prompt-ids 1,2,3,4,5,6,7,8 --max-tokens 16 --device "$device"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for arch in glm_moe_dsa deepseek_v4; do
  echo "== tiny random $arch checkpoint (dsa make-tiny --seed 1), greedy generation"
  "$dsa" make-tiny --arch "$arch" --seed 1 --out "$tmp/$arch" | tail -n 1
  d=$device
  [ "$arch" = deepseek_v4 ] && d=cpu  # the DeepSeek-V4 CUDA forward is not there yet
  "$dsa" generate --model "$tmp/$arch" --prompt-ids 1,2,3,4,5,6,7,8 --max-tokens 16 --device "$d"
done
