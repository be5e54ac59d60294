#!/usr/bin/env bash
# Golden files for the checkpoint variants transformers writes (issue 20), on a machine with
# torch and transformers 5.17 (the GPU machine has both; a CPU is enough, ~3 minutes):
#   tests/data/golden/deepseek_v4/{short,long}_transformers[_bfloat16].safetensors
#     from `dsa make-tiny --arch deepseek_v4 --seed 1 --variant transformers` (FP8 wo_a + .scale,
#     bf16 / f16 small vectors, f32 norms, no MTP layer, compress_ratios' trailing entry), read by
#     transformers itself (FineGrainedFP8Config(dequantize=True); loading_info must be clean);
#   tests/data/golden/glm_moe_dsa/{short,long}_transformers[_bfloat16].safetensors
#     from `dsa make-tiny --arch glm_moe_dsa --seed 1 --bf16 --variant transformers` (bf16 router
#     bias, as save_pretrained writes a bf16 model).
# Then runs the golden tests that read them (they skip, saying so, while the files are absent).
# Commit the new files. Usage: scripts/gpu/make_variant_goldens.sh   (OUT=dir for logs)
set -euo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}
mkdir -p "$OUT"
build=${DSA_BUILD_DIR:-build-gpu}
if [ ! -x "$build/apps/dsa/dsa" ]; then
  DSA_BUILD_DIR=$build scripts/build.sh 2>&1 | tail -n 20
fi
cmake --build "$build" --target dsa_cli test_deepseek_v4 test_glm5 -j "${DSA_JOBS:-16}" | tail -n 5
dsa=$build/apps/dsa/dsa
python3 -c "import torch, transformers; print('torch', torch.__version__, 'transformers', transformers.__version__)"
python3 scripts/golden/make_golden_deepseek_v4.py --dsa "$dsa" --seed 1 --variant transformers 2>&1 \
  | tee "$OUT/golden_v4_transformers.log"
python3 scripts/golden/make_golden_glm5.py --dsa "$dsa" --seed 1 --bf16 --variant transformers 2>&1 \
  | tee "$OUT/golden_glm_transformers.log"
ls -la tests/data/golden/deepseek_v4/*_transformers* tests/data/golden/glm_moe_dsa/*_transformers*
ctest --test-dir "$build" --output-on-failure -R "TransformersVariant" 2>&1 | tail -n 40 | tee "$OUT/variant_tests.log"
