// `dsa bench attention`: the sparse-MLA decode op on the standard shapes (docs/kernels.md): GLM-5.1
// (h 64 / 32, top-2048, fp8_ds_mla pages of 64), the V3.2 shape (h 128, top-2048, incl. 128
// requests x 2 tokens), V4-Flash (h 64, SWA 128 + CSA top-512 + sink, MODEL1 SWA pages of 256
// and 64) and V4-Pro (h 128, SWA 128 + top-1024), T = 1, 8, 32, 128.
//
// Per shape: the default tactic's time (median over batches of back-to-back calls timed with
// CUDA events, after warm-up), rotating over input sets whose unique KV bytes together exceed
// 2x the L2 so that calls do not hit a warm L2; TFLOP/s from 2*H*K*(d_qk+512) per token; unique
// KV GB/s (distinct cache rows read per call x row bytes); % of the roofline floor
// max(flops / 790e12, bytes / 4.3e12). Also the best tactic of a sweep over all tactics.
// Ratios against the PyTorch baseline come from scripts/baseline_attention.py, which reads this
// JSON (same shape names).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <random>
#include <unordered_set>

#include "bench/bench.h"
#include "dsa/core/device.h"
#include "dsa/core/dtype_conv.h"
#include "dsa/formats/kv_layout.h"
#include "dsa/ops/sparse_mla/random_cache.h"
#include "dsa/ops/sparse_mla/sparse_mla.h"

#ifdef DSA_WITH_CUDA
#include <cuda_runtime.h>

#include "dsa/core/cuda_check.h"
#endif

namespace dsa::bench {
namespace {


struct AttnShape {
  std::string name;
  formats::KvFormat kind;
  int H;
  int reqs;            // requests per call
  int tokens_per_req;  // query tokens per request (T = reqs * tokens_per_req)
  int main_k, main_page, main_ctx;      // main list width, page size, request context (tokens)
  int extra_k = 0, extra_page = 64, extra_ctx = 0;  // extra (compressed) list
  bool sink = false;
};

std::vector<AttnShape> shapes(bool quick) {
  std::vector<AttnShape> v;
  const std::vector<int> Ts = quick ? std::vector<int>{1, 32} : std::vector<int>{1, 8, 32, 128};
  for (int T : Ts) v.push_back({fmt::format("glm5.1_h64_k2048_T{}", T), formats::KvFormat::DsMla, 64, T, 1, 2048, 64, 4096});
  for (int T : Ts) v.push_back({fmt::format("glm5.1_h32_k2048_T{}", T), formats::KvFormat::DsMla, 32, T, 1, 2048, 64, 4096});
  for (int T : Ts) v.push_back({fmt::format("v3.2_h128_k2048_T{}", T), formats::KvFormat::DsMla, 128, T, 1, 2048, 64, 4096});
  v.push_back({"v3.2_h128_k2048_b128x2", formats::KvFormat::DsMla, 128, 128, 2, 2048, 64, 4096});
  for (int page : {256, 64})
    for (int T : Ts)
      v.push_back({fmt::format("v4flash_h64_swa128_top512_p{}_T{}", page, T), formats::KvFormat::Model1, 64, T, 1, 128,
                   page, 256, 512, 64, 2048, true});
  for (int T : Ts)
    v.push_back({fmt::format("v4pro_h128_swa128_top1024_T{}", T), formats::KvFormat::Model1, 128, T, 1, 128, 256, 256,
                 1024, 64, 4096, true});
  return v;
}

#ifdef DSA_WITH_CUDA

// A device cache of `pages` pages filled with valid random bytes (a host template of up to 64
// pages, tiled on the device), plus the row size in bytes.
Tensor make_device_cache(formats::KvFormat kind, int page, int64_t pages, std::mt19937_64& gen) {
  const size_t pb = formats::kv_page_bytes(kind, page);
  const int64_t tmpl_pages = std::min<int64_t>(pages, std::max<int64_t>(1, 4096 / page));
  std::vector<uint8_t> h(pb * tmpl_pages, 0);
  ops::fill_random_kv_pages(kind, page, h.data(), tmpl_pages, ops::RandomKvScales::Fixed, gen);
  Tensor t = Tensor::empty({static_cast<int64_t>(pb * pages)}, DType::U8, Device::cuda(0));
  const size_t tb = h.size();
  DSA_CUDA_CHECK(cudaMemcpy(t.raw(), h.data(), tb, cudaMemcpyHostToDevice));
  for (size_t done = tb; done < t.nbytes();) {
    const size_t n = std::min(done, t.nbytes() - done);
    DSA_CUDA_CHECK(cudaMemcpy(static_cast<char*>(t.raw()) + done, t.raw(), n, cudaMemcpyDeviceToDevice));
    done += n;
  }
  return t;
}

// Index rows for `reqs` requests starting at request r0 of a cache whose request r owns pages
// perm[r*blocks .. (r+1)*blocks). window: the last `k` positions of ctx (sliding window) else k
// distinct random positions (top-k). Returns unique slots in `uniq`.
Tensor make_indices(int r0, int reqs, int tpr, int k, int page, int ctx, bool window, const std::vector<int32_t>& perm,
                    std::mt19937_64& gen, std::unordered_set<int64_t>& uniq) {
  const int blocks = (ctx + page - 1) / page;
  Tensor idx = Tensor::empty({static_cast<int64_t>(reqs) * tpr, k}, DType::I32);
  std::vector<int32_t> pos(ctx);
  for (int r = 0; r < reqs; ++r)
    for (int j = 0; j < tpr; ++j) {
      int32_t* row = idx.data<int32_t>() + (static_cast<int64_t>(r) * tpr + j) * k;
      std::iota(pos.begin(), pos.end(), 0);
      if (!window) {
        for (int i = 0; i < k; ++i) std::swap(pos[i], pos[i + gen() % (ctx - i)]);  // partial shuffle
      } else {
        std::iota(pos.begin(), pos.begin() + k, ctx - k);
      }
      for (int i = 0; i < k; ++i) {
        const int p = pos[i];
        const int32_t slot = perm[static_cast<int64_t>(r0 + r) * blocks + p / page] * page + p % page;
        row[i] = slot;
        uniq.insert(slot);
      }
    }
  return idx.to(Device::cuda(0));
}

struct InputSet {
  ops::SparseMlaParams p;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median per-call microseconds of `tactic` cycling over the sets (batches of >= 10 calls).
double time_calls(std::vector<InputSet>& sets, int tactic, int batches) {
  const int per_batch = std::max<int>(10, static_cast<int>(sets.size()));
  for (int w = 0; w < 3; ++w)
    for (auto& s : sets) ops::sparse_mla_decode(s.p, tactic);
  DSA_CUDA_CHECK(cudaDeviceSynchronize());
  cudaEvent_t a, b;
  DSA_CUDA_CHECK(cudaEventCreate(&a));
  DSA_CUDA_CHECK(cudaEventCreate(&b));
  std::vector<double> us;
  size_t next = 0;
  for (int i = 0; i < batches; ++i) {
    DSA_CUDA_CHECK(cudaEventRecord(a));
    for (int c = 0; c < per_batch; ++c) ops::sparse_mla_decode(sets[next++ % sets.size()].p, tactic);
    DSA_CUDA_CHECK(cudaEventRecord(b));
    DSA_CUDA_CHECK(cudaEventSynchronize(b));
    float ms = 0;
    DSA_CUDA_CHECK(cudaEventElapsedTime(&ms, a, b));
    us.push_back(ms * 1000.0 / per_batch);
  }
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return median(us);
}

std::vector<Row> run(const Options& opt) {
  DSA_CHECK(!cuda_devices().empty(), "dsa bench attention needs a CUDA device ({})", cuda_unavailable_reason());
  const auto& devinfo = cuda_devices()[0];
  std::vector<Row> rows;
  std::mt19937_64 gen(1234);
  // DSA_BENCH_FILTER=substring: only matching shapes; DSA_BENCH_NO_SWEEP=1: default tactic only
  // (both for profiling runs, e.g. under ncu).
  const char* filter = std::getenv("DSA_BENCH_FILTER");
  const bool sweep = !std::getenv("DSA_BENCH_NO_SWEEP");
  for (const AttnShape& sh : shapes(opt.quick)) {
    if (filter && sh.name.find(filter) == std::string::npos) continue;
    const int T = sh.reqs * sh.tokens_per_req;
    const int D = ops::kv_cache_d_qk(sh.kind);
    const int row_bytes = sh.kind == formats::KvFormat::DsMla ? kv::ds_mla::kTokenBytes : kv::model1::kLogicalBytes;
    // Unique bytes of one call, to size the rotation: > 2x L2 over all sets (at most 128 sets).
    const double call_bytes_est = static_cast<double>(T / sh.tokens_per_req) * (sh.main_k + sh.extra_k) * row_bytes;
    const double l2 = devinfo.l2_bytes ? static_cast<double>(devinfo.l2_bytes) : 60e6;
    const int nsets = static_cast<int>(std::clamp(std::ceil(2.0 * l2 / call_bytes_est), 1.0, 128.0));
    const int all_reqs = nsets * sh.reqs;

    auto perm_for = [&](int ctx, int page) {
      const int blocks = (ctx + page - 1) / page;
      std::vector<int32_t> perm(static_cast<size_t>(all_reqs) * blocks);
      std::iota(perm.begin(), perm.end(), 0);
      std::shuffle(perm.begin(), perm.end(), gen);
      return perm;
    };
    const auto main_perm = perm_for(sh.main_ctx, sh.main_page);
    Tensor main_cache = make_device_cache(sh.kind, sh.main_page, static_cast<int64_t>(main_perm.size()), gen);
    std::vector<int32_t> extra_perm;
    Tensor extra_cache;
    if (sh.extra_k) {
      extra_perm = perm_for(sh.extra_ctx, sh.extra_page);
      extra_cache = make_device_cache(sh.kind, sh.extra_page, static_cast<int64_t>(extra_perm.size()), gen);
    }
    Tensor sink;
    if (sh.sink) {
      Tensor hs = Tensor::empty({sh.H}, DType::F32);
      for (int h = 0; h < sh.H; ++h) hs.data<float>()[h] = std::normal_distribution<float>(0.f, 1.f)(gen);
      sink = hs.to(Device::cuda(0));
    }
    std::vector<InputSet> sets(nsets);
    double uniq_bytes = 0;
    for (int s = 0; s < nsets; ++s) {
      std::unordered_set<int64_t> um, ue;
      auto& p = sets[s].p;
      Tensor hq = Tensor::empty({T, sh.H, D}, DType::BF16);
      for (int64_t i = 0; i < hq.numel(); ++i)
        hq.data<uint16_t>()[i] = f32_to_bf16_bits(std::normal_distribution<float>(0.f, 1.f)(gen));
      p.q = hq.to(Device::cuda(0));
      p.main.cache = {sh.kind, sh.main_page, main_cache};
      p.main.indices = make_indices(s * sh.reqs, sh.reqs, sh.tokens_per_req, sh.main_k, sh.main_page, sh.main_ctx,
                                    sh.extra_k > 0, main_perm, gen, um);
      if (sh.extra_k) {
        ops::SparseKeyList e;
        e.cache = {sh.kind, sh.extra_page, extra_cache};
        e.indices = make_indices(s * sh.reqs, sh.reqs, sh.tokens_per_req, sh.extra_k, sh.extra_page, sh.extra_ctx,
                                 false, extra_perm, gen, ue);
        p.extra = e;
      }
      p.sink = sink;
      p.softmax_scale = 1.f / std::sqrt(static_cast<float>(D));
      p.o = Tensor::empty({T, sh.H, 512}, DType::BF16, Device::cuda(0));
      p.lse = Tensor::empty({T, sh.H}, DType::F32, Device::cuda(0));
      uniq_bytes += static_cast<double>(um.size() + ue.size()) * row_bytes;
    }
    uniq_bytes /= nsets;

    const int batches = opt.quick ? 5 : 25;
    const double us = time_calls(sets, -1, batches);
    const auto def = ops::sparse_mla_default_tactic(sets[0].p, devinfo.sm_count);
    // Sweep every tactic (what the tuner would do) and keep the best.
    const auto tactics = ops::sparse_mla_tactics(sets[0].p);
    double best_us = us;
    std::string best_name = def.name();
    for (size_t k = 0; sweep && k < tactics.size(); ++k) {
      const double t_us = time_calls(sets, static_cast<int>(k), opt.quick ? 3 : 9);
      if (t_us < best_us) {
        best_us = t_us;
        best_name = tactics[k].name();
      }
    }
    const double flops = 2.0 * sh.H * (sh.main_k + sh.extra_k) * (D + 512.0) * T;
    const double floor_us = std::max(flops / 790e12, uniq_bytes / 4.3e12) * 1e6;
    Row r;
    r.name = sh.name;
    r.us = us;
    r.tflops = flops / (us * 1e-6) / 1e12;
    r.gbs = uniq_bytes / (us * 1e-6) / 1e9;
    r.roofline_pct = floor_us / us * 100.0;
    r.extra["tactic"] = def.name();
    r.extra["best_us"] = best_us;
    r.extra["best_tactic"] = best_name;
    r.extra["T"] = T;
    r.extra["H"] = sh.H;
    r.extra["keys"] = sh.main_k + sh.extra_k;
    r.extra["sets"] = nsets;
    rows.push_back(r);
    std::printf("  %-40s %9.2f us  %7.1f TFLOP/s  (best %s %.2f us)\n", sh.name.c_str(), us, r.tflops,
                best_name.c_str(), best_us);
    std::fflush(stdout);
  }
  return rows;
}

#else
std::vector<Row> run(const Options&) { fail("dsa bench attention needs a build with CUDA"); }
#endif

const bool registered = add_bench("attention", "Sparse-MLA decode (GLM-5.1, V3.2, V4-Flash, V4-Pro shapes)", run);

}  // namespace
}  // namespace dsa::bench
