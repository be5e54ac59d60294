#!/usr/bin/env bash
# One pass on the GPU machine: build Release for sm_90a (and sm_120a, as CI does) with all cores, run the GPU tests on the
# native route and on the SM120 route (DSA_DEVICE_CAPABILITY=12.0), run the benchmarks. Logs and
# JSON go to ${OUT:-out}. Usage: scripts/gpu-check.sh [stage ...]; stages: build test test120
# select bench tune loadtime modelperf decode (default: build test test120 select bench). Keep a run under 10 minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-out}
mkdir -p "$OUT"
stages=("$@")
[ ${#stages[@]} -eq 0 ] && stages=(build test test120 select bench)
build=${DSA_BUILD_DIR:-build-gpu}
dsa=$build/apps/dsa/dsa
rc=0
for s in "${stages[@]}"; do
  echo "=== stage $s ($(date +%T))"
  case $s in
    build)
      nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.used --format=csv | tee "$OUT/info.txt"
      DSA_BUILD_DIR=$build DSA_CUDA_ARCHS=${DSA_CUDA_ARCHS:-90a;120a} DSA_JOBS=16 DSA_CUDA=ON \
        scripts/build.sh 2>&1 | tail -n 30 | tee "$OUT/build.log" || { echo "BUILD FAILED"; exit 1; }
      "$dsa" info | tee -a "$OUT/info.txt"
      DSA_DEVICE_CAPABILITY=12.0 "$dsa" info | grep -E "override|effective" | tee -a "$OUT/info.txt"
      ;;
    test)
      ctest --test-dir "$build" --output-on-failure -j 4 2>&1 | tail -n 60 | tee "$OUT/test.log" || rc=1 ;;
    test120)
      DSA_DEVICE_CAPABILITY=12.0 ctest --test-dir "$build" --output-on-failure -j 4 -R "Cuda|Gpu|Select" 2>&1 \
        | tail -n 60 | tee "$OUT/test120.log" || rc=1 ;;
    bench)
      for b in attention moe linear; do
        if "$dsa" bench --help 2>/dev/null | grep -q "$b"; then
          "$dsa" bench "$b" --json "$OUT/bench_$b.json" 2>&1 | tee "$OUT/bench_$b.txt" || rc=1
        fi
      done
      for py in scripts/baseline_*.py; do
        [ -f "$py" ] && PYTHONUNBUFFERED=1 python3 "$py" --out "$OUT" 2>&1 | tail -n 40 | tee "$OUT/$(basename "$py" .py).txt"
      done
      ;;
    select)
      for m in deepseek-v4-flash deepseek-v4-pro glm-5.1; do
        "$dsa" select --model $m
        DSA_DEVICE_CAPABILITY=12.0 "$dsa" select --model $m
      done 2>&1 | tee "$OUT/select.txt" | grep -E "^(model|platform|[a-z_]+:|  backend)" ;;
    tune)
      # Cold (empty cache) then warm (same cache): the second run must find every bucket.
      cache=$(mktemp -d)
      for pass in cold warm; do
        /usr/bin/time -f "$pass: %e s wall" env DSA_CACHE_DIR=$cache "$dsa" tune --model ${DSA_TUNE_MODEL:-glm-5.1} \
          --max-num-batched-tokens ${DSA_TUNE_TOKENS:-256} --max-num-seqs ${DSA_TUNE_SEQS:-64} >"$OUT/tune_$pass.txt" 2>&1 || rc=1
        grep -vE "^dsa tune \[" "$OUT/tune_$pass.txt" | tail -n 40
      done
      cp "$cache"/*.json "$OUT/" 2>/dev/null || true ;;
    loadtime)
      # Load time of a synthetic checkpoint at real V4-Flash layer shapes (one layer).
      d=$(mktemp -d)
      "$dsa" make-tiny --arch deepseek_v4 --preset flash --layers 1 --fast-fill --out "$d/flash1" 2>&1 | tail -n 3
      "$dsa" check-model --model "$d/flash1" --device cuda 2>&1 | tail -n 8 | tee "$OUT/loadtime.txt" || rc=1
      rm -rf "$d" ;;
    modelperf)
      # Greedy generation timings: tiny models, then real layer shapes with a few layers
      # (GLM-5.1: 3 dense + 1 MoE layer; V4-Flash: 2 layers) and fast-filled weights.
      d=$(mktemp -d)
      prompt=$(seq -s, 1 64)
      for arch in glm_moe_dsa deepseek_v4; do
        "$dsa" make-tiny --arch $arch --out "$d/$arch" --seed 1 >/dev/null
        for dev in cpu cuda; do
          echo "tiny $arch $dev: $("$dsa" generate --model "$d/$arch" --prompt-ids $prompt --max-tokens 32 --device $dev 2>&1 | tail -n 1)"
        done
      done 2>&1 | tee "$OUT/modelperf.txt"
      for spec in "glm_moe_dsa glm-5.1 4" "deepseek_v4 flash 2"; do
        set -- $spec
        "$dsa" make-tiny --arch $1 --preset $2 --layers $3 --fast-fill --out "$d/real" >/dev/null 2>&1
        echo "real $2 $3 layers cuda: $("$dsa" generate --model "$d/real" --prompt-ids $prompt --max-tokens 32 --device cuda --tune-seconds 15 2>&1 | tail -n 1)"
        rm -rf "$d/real"
      done 2>&1 | tee -a "$OUT/modelperf.txt"
      rm -rf "$d" ;;
    decode)
      # Decode through the engine on real-shape checkpoints (fast-filled): per layer kind device
      # time against its HBM floor, host time, launches, full-model tok/s (dsa bench decode).
      for spec in "flash 4" "glm-5.1 5"; do
        set -- $spec
        "$dsa" bench decode --preset $1 --layers $2 --batch ${DSA_DECODE_BATCH:-1,8,32} --context ${DSA_DECODE_CONTEXT:-512} \
          --json "$OUT/bench_decode_$1.json" 2>&1 | tee "$OUT/bench_decode_$1.txt" || rc=1
      done ;;
    *) echo "unknown stage $s"; rc=1 ;;
  esac
done
exit $rc
