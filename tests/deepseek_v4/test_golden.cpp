// DeepSeek-V4 forward vs transformers 5.17 (tests/data/golden/deepseek_v4, made from the same
// tiny checkpoint: scripts/golden/README.md). Checked: top-1 agreement at every prompt position
// and every decode step, and the distribution of |logit difference| on the rows the file keeps.
//
// Tolerance. transformers runs without any KV quantization; dsa stores the sliding-window and
// compressed KV in FP8 (MODEL1: e4m3 NoPE with UE8M0 scales per 64 values, bf16 rope), the
// indexer keys in e4m3, and feeds bf16 activations to every linear layer (as the engine does on
// the GPU). Yardstick: transformers' own bf16 run against its float32 run (the committed files)
// differs by mean |diff| 0.010-0.017, max 0.41, and agrees on top-1 at only 278 of the 300 long-
// prompt positions (the median gap between the two best logits of this random model is 0.16-0.25,
// so noise flips near-ties). FP8 KV adds e4m3's relative error (up to 2^-4 per value) on top; we
// measure mean |diff| 0.02-0.05 and top-1 93-96 %, with one outlier row (short prompt, position
// 10: 1.2, where both transformers runs agree with each other; see the report in the branch).
// Bounds: top-1 >= 90 % of all positions and decode steps; >= 90 % of the compared rows within
// 0.25; mean |diff| <= 0.06; max <= 1.5. A structural bug (wrong RoPE pairs, missing sink, a
// dropped or misplaced compressed entry, wrong mHC direction) moves most rows by 0.3-2 and fails
// the row and mean bounds.
// CUDA bounds (kCuda). The GPU kernels differ from the CPU reference by float accumulation order
// and the attention kernel's bf16 P; on the long prompt the CUDA numbers equal the CPU's (H200,
// 2026-11-30: mean 0.0219 vs 0.0216, 16/16 and 8/8 top-1). The short prompt, though, sits on a
// near-tie of this random model's indexer (top-4 of 6-8 entries in the decode steps): the CPU
// forward itself, with its attention output perturbed by one bf16 ulp (relative 4e-3 .. 1e-2),
// gives decode mean 0.063-0.067, max 1.07, rows 21-22/24, top-1 29/32 -- and so does CUDA (mean
// 0.067 / 0.074, rows 21/24 and 20/24, max 1.31 / 1.33, top-1 30/32; CUDA vs CPU: top-1 28/32, mean
// 0.054). The CPU bounds above would fail a run that is within one ulp of passing them. CUDA on
// the short prompts: top-1 >= 85 %, rows within 0.25 >= 80 %, mean <= 0.08, max <= 1.5 (the long
// prompt keeps the CPU bounds). A structural bug still fails:
// a zero attention sink (CPU experiment) gives 16/24 rows and mean 0.083 on the short prompt.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>

#include "common/testing.h"
#include "dsa/engine/session.h"
#include "dsa/model/checkpoint_tiny.h"
#include "v4_test_util.h"

using namespace dsa;
using namespace dsa::test::v4;

namespace {

struct Tolerance {
  double top1, row_max, rows_ok, max_abs, mean_abs;
};
constexpr Tolerance kCpu{0.90, 0.25, 0.90, 1.5, 0.06};
constexpr Tolerance kCuda{0.85, 0.25, 0.80, 1.5, 0.08};

struct RunResult {
  Tensor prefill;  // f32 [T][V]
  Tensor decode;   // f32 [N][V]: row 0 = last prefill row, row i = after decode_ids[0..i)
};

// Prefill in chunks of `chunk` tokens (0 = all at once), then the golden decode tokens one by one.
RunResult run(model::v4::DeepseekV4Model& m, const Golden& g, int64_t chunk = 0) {
  const std::string dev = m.device().str();
  const int64_t T = static_cast<int64_t>(g.prompt.size()), N = static_cast<int64_t>(g.decode_ids.size());
  const int64_t V = m.config().vocab_size;
  engine::Session session(m);
  const kv::RequestId req = session.add_request();
  RunResult out;
  out.prefill = Tensor::empty({T, V}, DType::F32);
  out.decode = Tensor::empty({N, V}, DType::F32);
  if (chunk <= 0) chunk = T;
  const auto t0 = std::chrono::steady_clock::now();
  for (int64_t s = 0; s < T; s += chunk) {
    engine::ForwardBatch b;
    for (int64_t t = s; t < std::min(T, s + chunk); ++t) {
      b.token_ids.push_back(g.prompt[t]);
      b.request.push_back(req);
      b.positions.push_back(t);
    }
    Tensor l = session.forward(b, true);
    out.prefill.slice(0, s, s + l.size(0)).copy_from(l);
  }
  const auto t1 = std::chrono::steady_clock::now();
  out.decode.select(0, 0).copy_from(out.prefill.select(0, T - 1));
  for (int64_t i = 1; i < N; ++i) {
    engine::ForwardBatch b{{g.decode_ids[i - 1]}, {req}, {T + i - 1}};
    out.decode.select(0, i).copy_from(session.forward(b).select(0, 0));
  }
  const auto t2 = std::chrono::steady_clock::now();
  const double pre_s = std::chrono::duration<double>(t1 - t0).count(), dec_s = std::chrono::duration<double>(t2 - t1).count();
  std::printf("%s timing: prefill %lld tokens in %.2f s (%.1f tok/s), %lld decode steps in %.2f s (%.1f tok/s)\n",
              dev.c_str(), static_cast<long long>(T), pre_s, static_cast<double>(T) / pre_s, static_cast<long long>(N - 1), dec_s,
              static_cast<double>(N - 1) / dec_s);
  session.free_request(req);
  return out;
}

void check_against(const RunResult& r, const Golden& g, const std::string& what, const Tolerance& tol) {
  const int64_t T = static_cast<int64_t>(g.prompt.size()), K = g.prefill_logits.size(0);
  int64_t top1 = 0;
  for (int64_t t = 0; t < T; ++t) {
    const bool ok = argmax_row(r.prefill, t) == g.prefill_top1[t];
    top1 += ok;
    if (!ok && std::getenv("DSA_V4_ROWS")) std::printf("  top-1 differs at position %lld\n", static_cast<long long>(t));
  }
  const DiffStats pre = compare_logits(r.prefill.slice(0, T - K, T).contiguous(), g.prefill_logits);
  const DiffStats dec = compare_logits(r.decode, g.decode_logits);
  std::printf("[%s] prefill: top-1 %lld/%lld positions; last %lld rows: %s\n[%s] decode: %s\n", what.c_str(),
              static_cast<long long>(top1), static_cast<long long>(T), static_cast<long long>(K), pre.str().c_str(),
              what.c_str(), dec.str().c_str());
  if (std::getenv("DSA_V4_ROWS"))
    for (int64_t k = 0; k < K; ++k) {
      const DiffStats row = compare_logits(r.prefill.slice(0, T - K + k, T - K + k + 1).contiguous(),
                                           g.prefill_logits.slice(0, k, k + 1).contiguous());
      std::printf("  pos %lld: %s\n", static_cast<long long>(T - K + k), row.str().c_str());
    }
  // Rows (kept prefill rows + decode rows) whose max |diff| stays within tol.row_max.
  int64_t rows = 0, rows_ok = 0;
  for (const auto& [got, want] : {std::pair{r.prefill.slice(0, T - K, T).contiguous(), g.prefill_logits},
                                  std::pair{r.decode, g.decode_logits}})
    for (int64_t i = 0; i < got.size(0); ++i) {
      ++rows;
      rows_ok += compare_logits(got.slice(0, i, i + 1).contiguous(), want.slice(0, i, i + 1).contiguous()).max_abs <=
                 tol.row_max;
    }
  std::printf("[%s] rows within %.2f: %lld/%lld\n", what.c_str(), tol.row_max, static_cast<long long>(rows_ok),
              static_cast<long long>(rows));
  const double top1_all = static_cast<double>(top1 + dec.top1_match), n_all = static_cast<double>(T + dec.rows);
  EXPECT_GE(top1_all, tol.top1 * n_all) << what;
  EXPECT_GE(static_cast<double>(rows_ok), tol.rows_ok * static_cast<double>(rows)) << what;
  EXPECT_LE(std::max(pre.max_abs, dec.max_abs), tol.max_abs) << what;
  EXPECT_LE(std::max(pre.mean_abs, dec.mean_abs), tol.mean_abs) << what;
}

}  // namespace

TEST(DeepseekV4Golden, ShortPromptFloat32) {
  const Golden g = load_golden("short");
  check_against(run(cpu_model(), g), g, "short/float32", kCpu);
}

TEST(DeepseekV4Golden, ShortPromptBfloat16) {
  const Golden g = load_golden("short_bfloat16");
  check_against(run(cpu_model(), g), g, "short/bfloat16", kCpu);
}

TEST(DeepseekV4Golden, LongPromptFloat32) {
  const Golden g = load_golden("long");
  check_against(run(cpu_model(), g), g, "long/float32", kCpu);
}

TEST(DeepseekV4Golden, CudaShortPromptFloat32) {
  DSA_REQUIRE_CUDA();
  const Golden g = load_golden("short");
  check_against(run(cuda_model(), g), g, "cuda short/float32", kCuda);
}

TEST(DeepseekV4Golden, CudaShortPromptBfloat16) {
  DSA_REQUIRE_CUDA();
  const Golden g = load_golden("short_bfloat16");
  check_against(run(cuda_model(), g), g, "cuda short/bfloat16", kCuda);
}

TEST(DeepseekV4Golden, CudaLongPromptFloat32) {
  DSA_REQUIRE_CUDA();
  const Golden g = load_golden("long");
  check_against(run(cuda_model(), g), g, "cuda long/float32", kCpu);  // no near-tie here: CPU bounds
}

// The CUDA forward against the CPU forward on the same checkpoint (the CPU result stands in for
// the golden file; same bounds): tells a CUDA-only divergence from a shared one when a CUDA
// golden test fails, and prints how far apart the two devices are.
TEST(DeepseekV4Golden, CudaMatchesCpuShortPrompt) {
  DSA_REQUIRE_CUDA();
  const Golden g = load_golden("short");
  const RunResult cpu = run(cpu_model(), g), gpu = run(cuda_model(), g);
  Golden ref = g;
  ref.prefill_logits = cpu.prefill;
  ref.decode_logits = cpu.decode;
  ref.prefill_top1.clear();
  for (int64_t t = 0; t < cpu.prefill.size(0); ++t) ref.prefill_top1.push_back(argmax_row(cpu.prefill, t));
  check_against(gpu, ref, "cuda vs cpu short", kCuda);
}

// The checkpoint in the storage transformers writes (`make-tiny --seed 1 --variant transformers`:
// FP8 wo_a, bf16/f16 small vectors, f32 norms, no MTP, trailing compress_ratios entry) against
// transformers reading those same files (scripts/gpu/make_variant_goldens.sh; torch 2.15 +
// transformers 5.17 on the CPU, 2026-12-01; loading_info clean, its o_a_proj equal to the FP8
// dequantization). transformers reads the variant and its release form bit-identically, as dsa
// does (tests/loader/test_variants.cpp), so what is left is dsa against transformers on this
// model. Measured on the CPU: long prompt 276/300 + 8/8 top-1, rows 23/24, mean 0.022 (CPU
// bounds); short prompt 22/24 + 8/8, mean 0.063, max 1.21, rows 21/24: positions 10 and 14 are
// off by 1.21 and 1.04 (the indexer near-tie at position 10 the release checkpoint shows too),
// every other row within 0.18 -- the near-tie bounds of the CUDA short prompt (kCuda) apply.
void check_variant_golden(const std::string& name, const Tolerance& tol) {
  const std::string path = std::string(DSA_TEST_DATA_DIR) + "/golden/deepseek_v4/" + name + ".safetensors";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not generated yet: run scripts/gpu/make_variant_goldens.sh";
  struct Dir {  // written once, removed at exit
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("dsa_v4_transformers_" + std::to_string(::getpid()));
    Dir() {
      TinyOptions o;
      o.arch = "deepseek_v4";
      o.seed = 1;
      o.variant = "transformers";
      make_tiny_checkpoint(o, path.string());
    }
    ~Dir() { std::filesystem::remove_all(path); }
  };
  static const Dir dir;
  auto m = model::v4::load_deepseek_v4_model(dir.path.string(), Device::cpu());
  const Golden g = load_golden(name);
  check_against(run(*m, g), g, "transformers variant " + name, tol);
}

TEST(DeepseekV4Golden, TransformersVariantShortPromptFloat32) { check_variant_golden("short_transformers", kCuda); }
TEST(DeepseekV4Golden, TransformersVariantLongPromptFloat32) { check_variant_golden("long_transformers", kCpu); }
