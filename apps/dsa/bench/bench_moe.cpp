// `dsa bench moe`: the MoE layer at V4-Flash (4096 -> 2048, 256 experts, top-6, MXFP4 experts),
// V4-Pro (7168 -> 3072, 384 experts, top-6, MXFP4) and GLM-5.1 (6144 -> 2048, 256 experts,
// top-8, FP8 128x128 experts) shapes, T = 1, 8, 32, 128 (decode) and 4096 (prefill).
// Decode rows are judged by the routed weight bytes the expert GEMMs stream per unit time against
// the copy bandwidth measured in the same run; the prefill row by TFLOP/s against the measured
// bf16 cuBLAS ceiling. Baselines in the same run: the previous automatic rule of the tile kernel
// (tactics 0-2, "old"), every tactic on its own (JSON t0_us .. t10_us: tile 0-2, stream 3-8,
// GEMV 9-10), and cuBLAS bf16 GEMMs per used expert over bf16 (dequantized-size) weights.
#include <cmath>
#include <cstdio>
#include <set>

#include "bench/bench.h"
#include "bench/bench_util_gpu.h"
#include "dsa/core/device.h"
#include "dsa/core/error.h"
#include "dsa/ops/linear/linear.h"
#include "dsa/ops/moe/moe_layer.h"
#include "dsa/ops/moe/random_fill.h"

namespace dsa::bench {
namespace {

#ifdef DSA_WITH_CUDA
struct Spec {
  const char* name;
  int64_t H, I, E;
  int k;
  bool glm;
};

ops::ExpertWeights make_weights(ops::WeightFormat f, int64_t E, int64_t N, int64_t K, uint64_t seed) {
  ops::ExpertWeights w;
  w.format = f;
  const Device d = Device::cuda();
  if (f == ops::WeightFormat::MXFP4) {
    w.weight = Tensor::empty({E, N, K / 2}, DType::U8, d);
    w.scale = Tensor::empty({E, N, K / 32}, DType::E8M0, d);
    ops::random_fill_bytes(w.weight, seed);
    ops::random_fill_bytes(w.scale, seed + 1, 118, 124);
  } else {
    w.weight = Tensor::empty({E, N, K}, DType::E4M3, d);
    w.scale = Tensor::empty({E, (N + 127) / 128, K / 128}, DType::F32, d);
    ops::random_fill_bytes(w.weight, seed, 0, 255, true);
    ops::random_fill_f32(w.scale, seed + 1, 1e-4f, 1e-3f);
  }
  return w;
}

// The automatic rule before the stream kernel (tile kernel only), kept as the "old" baseline.
int old_rule(ops::WeightFormat f, double per_group) {
  if (per_group >= 32) return 1;
  return f == ops::WeightFormat::MXFP4 && per_group < 0.1 ? 2 : 0;
}

std::vector<Row> run(const Options& o) {
  DSA_CHECK(!cuda_devices().empty(), "bench moe needs a CUDA device");
  DSA_CUDA_CHECK(cudaSetDevice(o.device));
  const double copy_gbs = measured_copy_gbs();
  const double ceil_tflops = measured_bf16_tflops();
  std::printf("measured: copy %.0f GB/s (read+write), bf16 cuBLAS 8192^3 %.0f TFLOP/s\n", copy_gbs, ceil_tflops);
  std::vector<Row> rows;
  const Spec specs[] = {{"v4flash", 4096, 2048, 256, 6, false},
                        {"v4pro", 7168, 3072, 384, 6, false},
                        {"glm51", 6144, 2048, 256, 8, true}};
  // --quick keeps T = 8: the GEMV tactics (9-10) and the automatic rule's bound for them are
  // judged at T = 1 and 8.
  std::vector<int64_t> Ts = o.quick ? std::vector<int64_t>{1, 8, 32, 4096} : std::vector<int64_t>{1, 8, 32, 128, 4096};
  for (const Spec& s : specs) {
    const Device d = Device::cuda();
    const auto fmt = s.glm ? ops::WeightFormat::FP8Block : ops::WeightFormat::MXFP4;
    ops::MoeLayerWeights w;
    w.gate = Tensor::empty({s.E, s.H}, DType::F32, d);
    ops::random_fill_f32(w.gate, 10, -0.02f, 0.02f);
    w.gate_bias = Tensor::empty({s.E}, DType::F32, d);
    ops::random_fill_f32(w.gate_bias, 11, -0.01f, 0.01f);
    w.w13 = make_weights(fmt, s.E, 2 * s.I, s.H, 20);
    w.w2 = make_weights(fmt, s.E, s.H, s.I, 30);
    w.shared_w13 = make_weights(ops::WeightFormat::FP8Block, 1, 2 * s.I, s.H, 40);
    w.shared_w2 = make_weights(ops::WeightFormat::FP8Block, 1, s.H, s.I, 50);
    // Baseline weights: bf16, same shapes, a pool of 16 experts (each is far larger than the L2,
    // so reusing the pool costs the same as distinct experts; values do not matter but are not 0).
    const int64_t pool = std::min<int64_t>(16, s.E);
    Tensor b13 = Tensor::empty({pool, 2 * s.I, s.H}, DType::BF16, d), b2 = Tensor::empty({pool, s.H, s.I}, DType::BF16, d);
    ops::random_fill_bf16(b13, 60, 0.05f);
    ops::random_fill_bf16(b2, 61, 0.05f);
    ops::MoeLayerParams p;
    p.router = s.glm ? ops::RouterParams{ops::ScoreFunc::Sigmoid, s.k, 2.5f}
                     : ops::RouterParams{ops::ScoreFunc::SqrtSoftplus, s.k, 1.5f};
    p.swiglu_limit = s.glm ? 0.f : 10.f;
    const int64_t per_expert = w.w13.bytes_per_expert() + w.w2.bytes_per_expert();
    const int64_t shared_bytes = w.shared_w13.bytes_per_expert() + w.shared_w2.bytes_per_expert();
    for (int64_t T : Ts) {
      // Rotate 4 input batches (different routing) so repeats do not hit L2 with the same experts.
      const int nrot = 4;
      std::vector<Tensor> xs;
      for (int i = 0; i < nrot; ++i) {
        xs.push_back(Tensor::empty({T, s.H}, DType::BF16, d));
        ops::random_fill_bf16(xs.back(), 100 + i + 10 * T, 1.f);
      }
      Tensor out = Tensor::empty({T, s.H}, DType::BF16, d);
      ops::MoeWorkspace ws;
      p.tactic = -1;
      const bool decode = T <= 128;
      const int reps = decode ? 30 : 5;
      const double us = time_us([&](int i) { ops::moe_layer(xs[i % nrot], Tensor(), w, p, out, ws); }, 3, reps);
      // Unique experts per batch (for the bytes actually streamed) and rows per expert (baseline).
      // Each batch keeps its own layout so the GEMM timings below rotate over the 4 routings too.
      double uniq = 0;
      std::vector<std::vector<int32_t>> counts(nrot);
      std::vector<ops::MoeLayout> layouts(nrot);
      for (int i = 0; i < nrot; ++i) {
        ops::moe_layer(xs[i], Tensor(), w, p, out, ws);
        Tensor c = ws.layout.expert_counts.to(Device::cpu());
        counts[i].assign(c.data<int32_t>(), c.data<int32_t>() + s.E);
        for (int64_t e = 0; e < s.E; ++e) uniq += counts[i][e] > 0;
        layouts[i] = ops::make_moe_layout(T, s.k, s.E, p.alignment, d);
        // The workspace keeps flat capacity buffers (ops/moe/moe_layer.h): this call's ids are
        // the first T x k of them.
        ops::build_moe_layout(ws.topk_ids.slice(0, 0, T * s.k).reshape({T, s.k}), layouts[i]);
      }
      uniq /= nrot;
      const double bytes = uniq * per_expert + shared_bytes;
      const double flops = 2.0 * T * (s.k + 1) * 3.0 * s.H * s.I;
      const double routed_bytes = uniq * per_expert;
      const double gemm_flops = 2.0 * T * s.k * 3.0 * s.H * s.I;
      // Expert GEMMs alone (the routed part) with a given tactic (-1: the automatic rule).
      ops::ExpertGemmParams gp;
      gp.fuse_swiglu = true;
      gp.swiglu_limit = p.swiglu_limit;
      gp.rows_per_expert_hint = static_cast<double>(T) * s.k / s.E;
      ops::ExpertGemmParams dp;
      dp.rows_per_expert_hint = gp.rows_per_expert_hint;
      // Views of the layer's flat capacity buffers (sized by the moe_layer calls above) with the
      // shapes of layout l: [rows_cap][I] activations, [rows_cap][H] outputs.
      auto act_of = [&](const ops::MoeLayout& l) {
        return ws.act.slice(0, 0, l.rows_cap * (w.w13.n() / 2)).reshape({l.rows_cap, w.w13.n() / 2});
      };
      auto y_of = [&](const ops::MoeLayout& l) { return ws.y.slice(0, 0, l.rows_cap * s.H).reshape({l.rows_cap, s.H}); };
      auto gemms_us = [&](int tactic, int n) {
        ops::ExpertGemmParams g2 = gp, d2 = dp;
        g2.tactic = d2.tactic = tactic;
        return time_us(
            [&](int i) {
              const ops::MoeLayout& l = layouts[i % nrot];
              Tensor act = act_of(l), y = y_of(l);
              ops::expert_gemm(xs[i % nrot], l.src_token, l.m_indices, w.w13, act, g2);
              ops::expert_gemm(act, Tensor(), l.m_indices, w.w2, y, d2);
            },
            2, n);
      };
      const double gemm_us = gemms_us(-1, reps);
      const int old_t = old_rule(fmt, gp.rows_per_expert_hint);
      const double old_us = gemms_us(old_t, reps);
      // Every tactic on its own (decode; at prefill only the 64-row tile is in the running).
      double tac_us[ops::kExpertGemmTactics];
      for (int tac = 0; tac < ops::kExpertGemmTactics; ++tac)
        tac_us[tac] = decode || tac == 1 ? gemms_us(tac, decode ? 15 : 3) : NAN;
      // Baseline: per used expert, bf16 cuBLAS GEMMs (gate/up then down) on that expert's rows.
      Tensor bx = Tensor::empty({T * s.k, s.H}, DType::BF16, d), bh = Tensor::empty({T * s.k, 2 * s.I}, DType::BF16, d);
      Tensor ba = Tensor::empty({T * s.k, s.I}, DType::BF16, d), by = Tensor::empty({T * s.k, s.H}, DType::BF16, d);
      ops::random_fill_bf16(bx, 7, 1.f);
      ops::random_fill_bf16(ba, 8, 1.f);
      const auto& cnt = counts[nrot - 1];
      const double base_us = time_us(
          [&](int) {
            for (int64_t e = 0; e < s.E; ++e) {
              const int64_t c = cnt[e];
              if (c == 0) continue;
              Tensor o1 = bh.slice(0, 0, c), o2 = by.slice(0, 0, c);
              ops::linear_bf16(bx.slice(0, 0, c), b13.select(0, e % pool), o1);
              ops::linear_bf16(ba.slice(0, 0, c), b2.select(0, e % pool), o2);
            }
          },
          1, decode ? 5 : 3);
      Row r;
      r.name = fmt::format("{} T={}", s.name, T);
      r.us = us;
      r.tflops = flops / (us * 1e-6) / 1e12;
      r.gbs = bytes / (us * 1e-6) / 1e9;
      const double floor_us = std::max(bytes / (copy_gbs * 1e9), flops / (ceil_tflops * 1e12)) * 1e6;
      r.roofline_pct = floor_us / us * 100;
      const double gbs = routed_bytes / (gemm_us * 1e-6) / 1e9, old_gbs = routed_bytes / (old_us * 1e-6) / 1e9;
      r.extra["gemm_us"] = gemm_us;
      r.extra["gemm_GB/s"] = gbs;
      r.extra["gemm_%copy"] = gbs / copy_gbs * 100;
      r.extra["gemm_TFLOP/s"] = gemm_flops / (gemm_us * 1e-6) / 1e12;
      r.extra["gemm_%bf16_ceiling"] = gemm_flops / (gemm_us * 1e-6) / 1e12 / ceil_tflops * 100;
      r.extra["gemm_tactics"] = ops::resolve_expert_gemm_tactic(fmt, gp, 1, s.E, true) * 10 +
                                ops::resolve_expert_gemm_tactic(fmt, dp, 1, s.E, true);
      r.extra["old_us"] = old_us;
      r.extra["old_%copy"] = old_gbs / copy_gbs * 100;
      r.extra["old_tactic"] = old_t;
      r.extra["speedup_vs_old"] = old_us / gemm_us;
      r.extra["experts_used"] = uniq;
      r.extra["routed_MB"] = routed_bytes / 1e6;
      for (int tac = 0; tac < ops::kExpertGemmTactics; ++tac)
        if (!std::isnan(tac_us[tac])) r.extra[fmt::format("t{}_us", tac)] = tac_us[tac];
      r.extra["cublas_bf16_us"] = base_us;
      r.extra["speedup_vs_bf16"] = base_us / gemm_us;
      r.extra["copy_GB/s"] = copy_gbs;
      r.extra["bf16_ceiling_TFLOP/s"] = ceil_tflops;
      rows.push_back(r);
      std::printf("%s: layer %.1f us; expert GEMMs %.1f us = %.0f GB/s = %.1f%% of copy, %.1f TFLOP/s (old rule t%d: "
                  "%.1f us, %.1f%%; x%.2f); tactics:",
                  r.name.c_str(), us, gemm_us, gbs, gbs / copy_gbs * 100, gemm_flops / (gemm_us * 1e-6) / 1e12, old_t,
                  old_us, old_gbs / copy_gbs * 100, old_us / gemm_us);
      for (int tac = 0; tac < ops::kExpertGemmTactics; ++tac) std::printf(" %.1f", tac_us[tac]);
      std::printf(" us; cuBLAS bf16 per-expert %.1f us\n", base_us);
      std::fflush(stdout);
    }
  }
  return rows;
}
#else
std::vector<Row> run(const Options&) { fail("bench moe needs a CUDA build"); }
#endif

const bool registered =
    add_bench("moe", "MoE layer and expert GEMMs (V4-Flash, V4-Pro MXFP4; GLM-5.1 FP8) vs copy bandwidth / bf16 ceiling", run);

}  // namespace
}  // namespace dsa::bench
