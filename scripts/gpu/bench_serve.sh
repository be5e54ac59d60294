#!/usr/bin/env bash
# On the GPU machine, one pass: build dsa with the HTTP server (if not built yet), write a
# real-shape 4-layer GLM-5.1 checkpoint (`dsa make-tiny --preset glm-5.1 --layers 4 --fast-fill`),
# serve it with `dsa serve --device cuda`, run `dsa bench serve` against it (fixed concurrency 1
# and 16, and a Poisson rate), save the tables, JSON, /metrics and the server log to ${OUT:-out},
# then stop the server with SIGTERM (it must exit 0).
#
# That machine has no cpp-httplib package: put the header-only release (httplib.h) in a folder
# git ignores (e.g. ./cpp-httplib-0.11.4, copied from the shared gpu-deps) and give it in
# HTTPLIB_DIR (default: ./cpp-httplib-0.11.4).
# Knobs: DSA_BUILD_DIR (default /tmp/dsa-build-serve), CKPT (default /tmp/dsa-glm51-4l),
# BENCH_PROMPTS (64), BENCH_IN (512), BENCH_OUT (128), BENCH_RATE (8); for a dry run of this
# script without a GPU: SERVE_DEVICE=cpu TINY_ARGS="" (the tiny checkpoint) and small BENCH_*.
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
mkdir -p "$OUT"
build=${DSA_BUILD_DIR:-/tmp/dsa-build-serve}
httplib_dir=${HTTPLIB_DIR:-$PWD/cpp-httplib-0.11.4}
ckpt=${CKPT:-/tmp/dsa-glm51-4l}
prompts=${BENCH_PROMPTS:-64}
in_len=${BENCH_IN:-512}
out_len=${BENCH_OUT:-128}
rate=${BENCH_RATE:-8}
device=${SERVE_DEVICE:-cuda}
tiny_args=${TINY_ARGS---preset glm-5.1 --layers 4 --fast-fill}
dsa=$build/apps/dsa/dsa
log() { echo "=== $* ($(date +%T))" | tee -a "$OUT/bench_serve.log"; }

[ -f "$httplib_dir/httplib.h" ] || { echo "no httplib.h in $httplib_dir (set HTTPLIB_DIR)"; exit 1; }
if [ ! -x "$dsa" ]; then
  log build
  DSA_BUILD_DIR=$build DSA_CUDA_ARCHS=${DSA_CUDA_ARCHS:-90a} DSA_JOBS=16 DSA_CUDA=ON \
    scripts/build.sh -DHTTPLIB_INCLUDE="$httplib_dir" 2>&1 | tail -n 20 | tee "$OUT/build.log"
  [ -x "$dsa" ] || { echo "BUILD FAILED"; exit 1; }
fi
"$dsa" info | tee "$OUT/info.txt"
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,memory.used --format=csv | tee -a "$OUT/info.txt"

if [ ! -f "$ckpt/config.json" ]; then
  log make-tiny
  # shellcheck disable=SC2086 # word splitting of the flags intended
  "$dsa" make-tiny --arch glm_moe_dsa $tiny_args --out "$ckpt" 2>&1 | tail -n 3 \
    | tee -a "$OUT/bench_serve.log"
fi

log serve
# 2048 KV pages of 64 tokens: 16 sequences of 640 tokens need 160; room for the rate run's queue.
"$dsa" serve "$ckpt" --device "$device" --host 127.0.0.1 --port 0 \
  --no-tokenizer --max-num-seqs 16 --max-num-batched-tokens 2048 --max-model-len 4096 --tune-seconds ${TUNE_SECONDS:-120} \
  >"$OUT/serve.log" 2>&1 &
server=$!
port=""
for _ in $(seq 1 600); do  # up to 5 min: tuning, weights
  port=$(grep -oE "serving .* on http://127\.0\.0\.1:[0-9]+" "$OUT/serve.log" | grep -oE "[0-9]+$" | head -n 1)
  [ -n "$port" ] && break
  kill -0 $server 2>/dev/null || break
  sleep 0.5
done
if [ -z "$port" ]; then
  echo "dsa serve did not start:"; tail -n 30 "$OUT/serve.log"; kill $server 2>/dev/null; exit 1
fi
url=http://127.0.0.1:$port
vocab=$(grep -oE '"vocab_size": *[0-9]+' "$ckpt/config.json" | grep -oE '[0-9]+$')
rc=0
common=(--base-url "$url" --random-input-len "$in_len" --random-output-len "$out_len" --random-vocab-size "$vocab"
        --ignore-eos --no-progress)
log "bench serve: concurrency 1"
"$dsa" bench serve "${common[@]}" --num-prompts 8 --max-concurrency 1 --json "$OUT/bench_serve_c1.json" \
  2>&1 | tee "$OUT/bench_serve_c1.txt" || rc=1
log "bench serve: concurrency 16"
"$dsa" bench serve "${common[@]}" --num-prompts "$prompts" --max-concurrency 16 --json "$OUT/bench_serve_c16.json" \
  2>&1 | tee "$OUT/bench_serve_c16.txt" || rc=1
log "bench serve: Poisson rate $rate/s"
"$dsa" bench serve "${common[@]}" --num-prompts "$prompts" --request-rate "$rate" --json "$OUT/bench_serve_rate.json" \
  2>&1 | tee "$OUT/bench_serve_rate.txt" || rc=1
curl -s "$url/metrics" >"$OUT/metrics.txt" || true

log "stop (SIGTERM)"
kill -TERM $server
wait $server
src=$?
echo "dsa serve exited with $src" | tee -a "$OUT/bench_serve.log"
[ $src -eq 0 ] || rc=1
tail -n 5 "$OUT/serve.log"
exit $rc
