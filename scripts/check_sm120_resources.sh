#!/usr/bin/env bash
# CI check of the portable sparse-MLA backend's SM120 budget: reads the sm_120a cubins of
# src/dsa/ops/sparse_mla and src/dsa/ops/sparse_index from a CUDA build and fails when a kernel
# needs more than 101376 bytes of shared memory per block (static from the cubin + the dynamic
# amount its launcher requests: kMaxDynamicSmem in kernel_args.h for the decode kernels, 0 for
# the others), spills to local memory, or contains a wgmma (GMMA) instruction.
#
# Usage: scripts/check_sm120_resources.sh [BUILD_DIR]   (default: ${DSA_BUILD_DIR:-build})
# Needs cuobjdump + nvdisasm: $CUOBJDUMP, PATH, /usr/local/cuda/bin, or the PyPI wheels
# nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm (fetched into BUILD_DIR/.cuobjdump with pip when
# missing, unless DSA_NO_FETCH=1).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-${DSA_BUILD_DIR:-build}}
limit=${DSA_SMEM_LIMIT:-101376}  # override only to test this script
objdir="$build/src/CMakeFiles/dsa_ops.dir/dsa/ops"  # the ops layer's static library
mapfile -t objs < <(find "$objdir/sparse_mla" "$objdir/sparse_index" -name '*.cu.o' 2>/dev/null | sort)
[ ${#objs[@]} -gt 0 ] || { echo "check_sm120: no CUDA objects of sparse_mla under $objdir (build with CUDA first)"; exit 1; }

find_tool() {  # prints the path of cuobjdump, or nothing
  if [ -n "${CUOBJDUMP:-}" ] && [ -x "$CUOBJDUMP" ]; then echo "$CUOBJDUMP"; return; fi
  for c in "$(command -v cuobjdump || true)" /usr/local/cuda/bin/cuobjdump "$build/.cuobjdump/nvidia/cu13/bin/cuobjdump"; do
    if [ -n "$c" ] && [ -x "$c" ]; then echo "$c"; return 0; fi
  done
  return 0
}
tool=$(find_tool)
if [ -z "$tool" ] || ! PATH="$(dirname "$tool"):$PATH" command -v nvdisasm >/dev/null; then
  if [ "${DSA_NO_FETCH:-0}" != 1 ] && { command -v pip >/dev/null || command -v pip3 >/dev/null; }; then
    pipc=$(command -v pip || command -v pip3)
    tmp="$build/.cuobjdump/whl"
    mkdir -p "$tmp"
    "$pipc" download -q --no-deps -d "$tmp" "nvidia-cuda-cuobjdump>=13.0" "nvidia-cuda-nvdisasm>=13.0" >/dev/null
    for w in "$tmp"/*.whl; do python3 -m zipfile -e "$w" "$build/.cuobjdump" >/dev/null; done
    chmod +x "$build"/.cuobjdump/nvidia/cu*/bin/* 2>/dev/null || true
    tool=$(ls "$build"/.cuobjdump/nvidia/cu*/bin/cuobjdump 2>/dev/null | head -n1)
  fi
fi
[ -n "$tool" ] || { echo "check_sm120: cuobjdump not found (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm)"; exit 1; }
export PATH="$(dirname "$tool"):$PATH"
command -v nvdisasm >/dev/null || { echo "check_sm120: nvdisasm not found next to $tool (pip install nvidia-cuda-nvdisasm)"; exit 1; }

# Dynamic shared memory the decode launcher requests at most (compile kernel_args.h on the host).
dyn=$(printf '#include <cstdio>\n#include "dsa/ops/sparse_mla/cuda/portable/kernel_args.h"\nint main(){std::printf("%%d", dsa::ops::sparse_mla_cuda::kMaxDynamicSmem);}\n' |
  ${CXX:-c++} -std=c++20 -Isrc -x c++ - -o "$build/.sm120_dyn" && "$build/.sm120_dyn")

rc=0
printf "%-70s %8s %8s %8s %5s\n" kernel static dynamic total regs
for o in "${objs[@]}"; do
  usage=$("$tool" --dump-resource-usage "$o" 2>/dev/null | awk '/arch = /{a=$3} a=="sm_120a"')
  if [ -z "$usage" ]; then echo "FAIL: $o has no sm_120a image (build with DSA_CUDA_ARCHS containing 120a)"; rc=1; continue; fi
  while read -r name; do
    line=$(grep -A1 -F "Function $name:" <<<"$usage" | tail -n1)
    st=$(sed -E 's/.*SHARED:([0-9]+).*/\1/' <<<"$line")
    regs=$(sed -E 's/.*REG:([0-9]+).*/\1/' <<<"$line")
    local_b=$(sed -E 's/.*LOCAL:([0-9]+).*/\1/' <<<"$line")
    d=0
    [[ "$name" == *sparse_mla_decode_kernel* ]] && d=$dyn
    total=$((st + d))
    short=$(echo "$name" | cut -c1-70)
    printf "%-70s %8d %8d %8d %5d\n" "$short" "$st" "$d" "$total" "$regs"
    if [ "$total" -gt "$limit" ]; then echo "FAIL: $name needs $total bytes of shared memory > $limit"; rc=1; fi
    if [ "$local_b" -gt 0 ]; then echo "FAIL: $name uses $local_b bytes of local memory (spills)"; rc=1; fi
  done < <(grep -oE 'Function [^:]+' <<<"$usage" | sed 's/^Function //')
  if "$tool" -sass -arch sm_120a "$o" | grep -qE '\b[A-Z]*GMMA'; then
    echo "FAIL: $o contains wgmma (GMMA) instructions in its sm_120a code"; rc=1
  fi
done
[ $rc -eq 0 ] && echo "check_sm120: OK (limit $limit bytes, no wgmma, no local memory)"
exit $rc
