// `dsa bench linear`: dense projections of both models with FP8 128x128 block-scaled weights:
// dsa's kernel (bf16 activations), the act-quantized FP8 path (cuBLASLt block-scaled where the
// device supports it, else the kernel), and the cuBLAS bf16 baseline on bf16 weights of the same
// shape, all in the same run. Roofline floor: max(weight+activation bytes / copy bandwidth,
// FLOPs / bf16 ceiling). Decode rows (T <= 8) add the device time per call inside a CUDA graph
// over weights rotated through >= 256 MB (`graph_us`: what a replayed decode step pays) for the
// automatic choice and for every decode tactic (`t<tactic>[s<splits>]_us`, `best`).
#include <cstdio>
#include <string>
#include <utility>

#include "bench/bench.h"
#include "bench/bench_util_gpu.h"
#include "dsa/core/device.h"
#include "dsa/core/error.h"
#include "dsa/ops/linear/linear.h"
#include "dsa/ops/moe/random_fill.h"

namespace dsa::bench {
namespace {

#ifdef DSA_WITH_CUDA
struct Shape2 {
  const char* name;
  int64_t K, N;
};

std::vector<Row> run(const Options& o) {
  DSA_CHECK(!cuda_devices().empty(), "bench linear needs a CUDA device");
  DSA_CUDA_CHECK(cudaSetDevice(o.device));
  const double copy_gbs = measured_copy_gbs();
  const double ceil_tflops = measured_bf16_tflops();
  const bool lt_ok = ops::cublaslt_fp8_block_supported(o.device);
  std::printf("measured: copy %.0f GB/s, bf16 ceiling %.0f TFLOP/s; cuBLASLt block-scaled FP8: %s\n", copy_gbs,
              ceil_tflops, lt_ok ? "available" : "not available");
  const Shape2 shapes[] = {{"glm.q_b 2048->16384", 2048, 16384},
                           {"glm.o_proj 16384->6144", 16384, 6144},
                           {"glm.kv_a 6144->576", 6144, 576},
                           {"glm.q_a 6144->2048", 6144, 2048},
                           {"v4.wq_a 4096->1024", 4096, 1024},
                           {"v4.wkv 4096->512", 4096, 512},
                           {"v4.wq_b 1024->32768", 1024, 32768},
                           {"v4.wo_b 8192->4096", 8192, 4096}};
  std::vector<int64_t> Ts = o.quick ? std::vector<int64_t>{1, 4, 8, 4096} : std::vector<int64_t>{1, 2, 4, 8, 32, 128, 4096};
  // Decode (T <= 8): every kernel tactic that serves dense FP8 calls, each with its automatic
  // split-K, timed in the same run as the automatic choice (which is what `us` reports).
  // GEMV tactics also with fixed splits (the automatic rule splits only below one CTA per SM).
  const std::pair<int, int> decode_tactics[] = {{3, -1}, {4, -1}, {5, -1}, {6, -1}, {9, -1}, {9, 2},
                                                {9, 4},  {9, 8},  {10, -1}, {10, 2}, {10, 4}};
  std::vector<Row> rows;
  const Device d = Device::cuda();
  for (const auto& s : shapes) {
    ops::Fp8BlockWeight w{Tensor::empty({s.N, s.K}, DType::E4M3, d),
                          Tensor::empty({(s.N + 127) / 128, s.K / 128}, DType::F32, d)};
    ops::random_fill_bytes(w.weight, 1, 0, 255, true);
    ops::random_fill_f32(w.scale, 2, 1e-4f, 1e-3f);
    // Copies of the weights for the decode timings: together >= 256 MB (the H200's L2 is 60 MB).
    std::vector<ops::Fp8BlockWeight> rot{w};
    const int64_t wbytes = s.N * s.K;
    for (uint64_t c = 1; static_cast<int64_t>(rot.size()) * wbytes < (int64_t{256} << 20); ++c) {
      ops::Fp8BlockWeight wc{Tensor::empty({s.N, s.K}, DType::E4M3, d), w.scale};
      ops::random_fill_bytes(wc.weight, 10 + c, 0, 255, true);
      rot.push_back(wc);
    }
    Tensor wb = Tensor::empty({s.N, s.K}, DType::BF16, d);
    ops::random_fill_bf16(wb, 3, 0.05f);
    for (int64_t T : Ts) {
      Tensor x = Tensor::empty({T, s.K}, DType::BF16, d), out = Tensor::empty({T, s.N}, DType::BF16, d);
      ops::random_fill_bf16(x, 4 + T, 1.f);
      const int reps = T >= 4096 ? 10 : 50;
      ops::LinearFp8Params pk;
      pk.backend = ops::LinearBackend::Kernel;
      const double k_us = time_us([&](int) { ops::linear_fp8_block(x, w, out, pk); }, 3, reps);
      ops::LinearFp8Params pq;
      pq.act_fp8 = true;
      const double q_us = time_us([&](int) { ops::linear_fp8_block(x, w, out, pq); }, 3, reps);
      const double b_us = time_us([&](int) { ops::linear_bf16(x, wb, out); }, 3, reps);
      const double bytes = static_cast<double>(s.N) * s.K + 2.0 * T * (s.K + s.N);
      const double flops = 2.0 * T * s.N * s.K;
      Row r;
      r.name = fmt::format("{} T={}", s.name, T);
      r.us = k_us;
      r.tflops = flops / (k_us * 1e-6) / 1e12;
      r.gbs = bytes / (k_us * 1e-6) / 1e9;
      r.roofline_pct = std::max(bytes / (copy_gbs * 1e9), flops / (ceil_tflops * 1e12)) * 1e6 / k_us * 100;
      r.extra["actfp8_us"] = q_us;
      r.extra["actfp8_backend"] = ops::linear_fp8_backend_name(pq, d, T, s.N, s.K);
      r.extra["cublas_bf16_us"] = b_us;
      r.extra["speedup_vs_bf16"] = b_us / k_us;
      if (T <= 8) {
        // Device time inside a graph, weights rotated over >= 256 MB of copies (never L2-hot),
        // as a captured decode step sees them; `us` above is one eager call, host time included.
        const auto in_graph = [&](const ops::LinearFp8Params& pt) {
          const int calls = static_cast<int>(2 * rot.size());
          return time_graph_us([&](int i) { ops::linear_fp8_block(x, rot[i % rot.size()], out, pt); }, calls, 10);
        };
        r.extra["graph_us"] = in_graph(pk);
        r.extra["graph_gbs"] = bytes / (r.extra["graph_us"].get<double>() * 1e-6) / 1e9;
        std::string best;
        double best_us = 0;
        for (const auto& [t, ks] : decode_tactics) {
          ops::LinearFp8Params pt = pk;
          pt.tactic = t;
          pt.k_splits = ks;
          const double t_us = in_graph(pt);
          const std::string name = ks < 0 ? fmt::format("t{}", t) : fmt::format("t{}s{}", t, ks);
          r.extra[name + "_us"] = t_us;
          if (best.empty() || t_us < best_us) {
            best = name;
            best_us = t_us;
          }
        }
        r.extra["best"] = best;
        r.extra["best_gbs"] = bytes / (best_us * 1e-6) / 1e9;
        std::printf("%s: in a graph, cold weights: automatic %.1f us, best %s %.1f us (%.0f GB/s, %.0f %% of copy)\n",
                    r.name.c_str(), r.extra["graph_us"].get<double>(), best.c_str(), best_us,
                    bytes / (best_us * 1e-6) / 1e9, bytes / (best_us * 1e-6) / 1e9 / copy_gbs * 100);
      }
      rows.push_back(r);
      std::printf("%s: kernel %.1f us, act-fp8 (%s) %.1f us, cuBLAS bf16 %.1f us\n", r.name.c_str(), k_us,
                  ops::linear_fp8_backend_name(pq, d, T, s.N, s.K), q_us, b_us);
      std::fflush(stdout);
    }
  }
  return rows;
}
#else
std::vector<Row> run(const Options&) { fail("bench linear needs a CUDA build"); }
#endif

const bool registered = add_bench("linear", "FP8 block-scaled and bf16 dense projections (kernel, cuBLASLt, bf16 baseline)", run);

}  // namespace
}  // namespace dsa::bench
