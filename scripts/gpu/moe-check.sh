#!/usr/bin/env bash
# One GPU pass for the MoE expert GEMMs: Release build for sm_90a of test_moe, test_tune and
# the CLI, the MoE tests natively and under DSA_DEVICE_CAPABILITY=12.0 (the SM120 route),
# then `dsa bench moe` (table + JSON). Logs and JSON go to ${OUT:-./moe-check-out}.
# Usage: scripts/gpu/moe-check.sh   (env: DSA_BUILD_DIR, DSA_JOBS, DSA_CUDA_ARCHS, BENCH_ARGS)
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-./moe-check-out}
mkdir -p "$out"
build=${DSA_BUILD_DIR:-/tmp/moe-build}
jobs=${DSA_JOBS:-16}
export CCACHE_BASEDIR=$PWD
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
if ! { cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DDSA_CUDA_ARCHS="${DSA_CUDA_ARCHS:-90a}" \
         -DDSA_CUDA=ON >"$out/configure.log" 2>&1 &&
       cmake --build "$build" -j "$jobs" --target test_moe test_tune dsa_cli >"$out/build.log" 2>&1; }; then
  tail -40 "$out/configure.log" "$out/build.log"
  exit 1
fi
grep -E "expert_gemm.*(registers|spill)" "$out/build.log" | sort | uniq -c | head -20
rc=0
"$build/tests/test_moe" >"$out/test_moe.log" 2>&1 || rc=1
grep -E "Failure|FAILED|error:|PASSED|tests ran" "$out/test_moe.log" | head -30
DSA_DEVICE_CAPABILITY=12.0 "$build/tests/test_moe" --gtest_filter='MoeLayerCuda.*:ExpertGemmCuda.Dense*' \
  >"$out/test_moe_sm120.log" 2>&1 || rc=1
grep -E "Failure|FAILED|PASSED" "$out/test_moe_sm120.log" | head -10
"$build/tests/test_tune" --gtest_filter='*Moe*' 2>&1 | tail -4 | tee "$out/test_tune.log" || rc=1
"$build/apps/dsa/dsa" bench moe ${BENCH_ARGS:-} --json "$out/bench_moe.json" 2>&1 | tee "$out/bench_moe.txt" || rc=1
if command -v compute-sanitizer >/dev/null; then  # out-of-bounds / race check on the small cases
  timeout ${MEMCHECK_S:-180} compute-sanitizer --tool memcheck --error-exitcode 9 "$build/tests/test_moe" \
    --gtest_filter='ExpertGemmCuda.Fp8Ue8m0*:ExpertGemmCuda.GemvSmall*' 2>&1 | tail -6 | tee "$out/memcheck.log" || rc=1
fi
exit $rc
