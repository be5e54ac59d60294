// `dsa bench mhc | norm | rope | compressor`: the small per-layer ops of a decode step, at the
// shapes the forwards run them with, for T = 1, 8, 32, 128 tokens (quick: 1 and 32).
//
// At decode these ops move kilobytes to a few megabytes, so their floor (bytes / the copy
// bandwidth measured in the same run) is well under a microsecond and what they cost is latency:
// launch, one or two block reductions, a dependent load chain. Each row therefore reports the
// device time per call inside a CUDA graph of kGraphCalls calls (what the op costs inside a
// captured decode step; with DSA_PDL=1 successive calls overlap as successive kernels of a step
// do), the eager time per call (host launch included), and, measured in the same run, the graph
// time per call of the smallest kernel there is (a 1-element add_into): the per-kernel cost no op
// of one launch can go below. `vs_min_kernel` = graph time / that anchor.
//
//   mhc:        V4 (hc 4, d 4096): pre + attn_norm (a block's first sub-layer), post + the next
//               pre + norm (every other boundary: mhc_post_pre_norm), post alone (the last block),
//               head + final norm (before the LM head).
//   norm:       RMSNorm rows of V4 (attn/ffn 4096, q_norm 1024 of q_lora_rank, kv 512) and GLM-5.1
//               (hidden 6144, q_a 2048, kv_a 512); V4's per-head unweighted q norm + RoPE into the
//               padded bf16 query (64 heads x 512, fused op).
//   rope:       apply_rope on GLM's q rope slices (64 heads x 64 of 256-wide heads) and the indexer
//               q (32 heads x 128, offset 0), bf16 in place.
//   compressor: the V4 CSA (m 4, d 512 and the indexer's d 128) and HCA (m 128, d 512)
//               compressors over T decoding requests, each at a position that closes a window
//               (the costliest step: state recurrence, pooling, norm, RoPE, the entry write).
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/bench.h"
#include "bench/bench_util_gpu.h"
#include "dsa/core/device.h"
#include "dsa/core/error.h"

#ifdef DSA_WITH_CUDA
#include "dsa/ops/compressor/compressor_batch.h"
#include "dsa/ops/mhc/mhc.h"
#include "dsa/ops/norm/norm.h"
#include "dsa/ops/norm/norm_rope.h"
#include "dsa/ops/rope/rope.h"
#include "dsa/ops/tensor/tensor_ops.h"
#endif

namespace dsa::bench {
namespace {

#ifdef DSA_WITH_CUDA
constexpr int kGraphCalls = 16;

struct Ctx {
  double copy_gbs = 0;
  double min_kernel_us = 0;  // graph time per call of a 1-element add_into
  std::vector<int64_t> Ts;
};

Ctx start(const Options& o, const char* what) {
  DSA_CHECK(!cuda_devices().empty(), "bench {} needs a CUDA device", what);
  DSA_CUDA_CHECK(cudaSetDevice(o.device));
  Ctx c;
  c.copy_gbs = measured_copy_gbs();
  Tensor acc = Tensor::zeros({1}, DType::F32, Device::cuda()), one = Tensor::zeros({1}, DType::F32, Device::cuda());
  c.min_kernel_us = time_graph_us([&](int) { ops::add_into(acc, one); }, kGraphCalls, 50);
  c.Ts = o.quick ? std::vector<int64_t>{1, 32} : std::vector<int64_t>{1, 8, 32, 128};
  std::printf("measured copy bandwidth %.0f GB/s (read + write); smallest kernel in a graph %.2f us per call\n",
              c.copy_gbs, c.min_kernel_us);
  return c;
}

// One row: fn timed eagerly and inside a graph; bytes = what the op must read and write once.
Row measure(const Ctx& c, const std::string& name, double bytes, const std::function<void(int)>& fn, bool quick) {
  const int reps = quick ? 20 : 100;
  Row r;
  r.name = name;
  const double eager_us = time_us(fn, 3, reps);
  r.us = time_graph_us(fn, kGraphCalls, reps);
  const double floor_us = bytes / (c.copy_gbs * 1e9) * 1e6;
  r.gbs = bytes / (r.us * 1e-6) / 1e9;
  r.roofline_pct = floor_us / r.us * 100;
  r.extra["eager_us"] = eager_us;
  r.extra["floor_us"] = floor_us;
  r.extra["min_kernel_us"] = c.min_kernel_us;
  r.extra["vs_min_kernel"] = r.us / c.min_kernel_us;
  r.extra["bytes"] = bytes;
  std::printf("%-34s graph %7.2f us  eager %7.2f us  floor %6.2f us  %5.1f x the smallest kernel\n", name.c_str(), r.us,
              eager_us, floor_us, r.us / c.min_kernel_us);
  std::fflush(stdout);
  return r;
}

Tensor bf16(Shape s, uint64_t seed, float a = 1.f) {
  Tensor t = Tensor::empty(std::move(s), DType::BF16, Device::cuda());
  ops::random_fill_bf16(t, seed, a);
  return t;
}
Tensor f32(Shape s, uint64_t seed, float lo = -1.f, float hi = 1.f) {
  Tensor t = Tensor::empty(std::move(s), DType::F32, Device::cuda());
  ops::random_fill_f32(t, seed, lo, hi);
  return t;
}
Tensor positions(int64_t T, int64_t pos) {
  Tensor p = Tensor::empty({T}, DType::I32);
  for (int64_t t = 0; t < T; ++t) p.data<int32_t>()[t] = static_cast<int32_t>(pos + t);
  return p.to(Device::cuda());
}
double nb(const Tensor& t) { return static_cast<double>(t.nbytes()); }

std::vector<Row> run_mhc(const Options& o) {
  const Ctx c = start(o, "mhc");
  const int64_t hc = 4, d = 4096, nmix = (2 + hc) * hc;
  ops::MhcParams mp;
  ops::NormParams np;
  const Tensor fn = f32({nmix, hc * d}, 1, -0.01f, 0.01f), base = f32({nmix}, 2), scale = f32({3}, 3, 0.5f, 1.f);
  const Tensor hfn = f32({hc, hc * d}, 4, -0.01f, 0.01f), hbase = f32({hc}, 5), hscale = f32({1}, 6, 0.5f, 1.f);
  const Tensor w = bf16({d}, 7);
  std::vector<Row> rows;
  for (const int64_t T : c.Ts) {
    Tensor X = f32({T, hc, d}, 8), f = bf16({T, d}, 9);
    Tensor mix = Tensor::empty({T, nmix}, DType::F32, Device::cuda()), y = Tensor::empty({T, d}, DType::F32, Device::cuda());
    Tensor yn = Tensor::empty({T, d}, DType::BF16, Device::cuda());
    Tensor post = Tensor::empty({T, hc}, DType::F32, Device::cuda()), comb = Tensor::empty({T, hc, hc}, DType::F32, Device::cuda());
    Tensor hmix = Tensor::empty({T, hc}, DType::F32, Device::cuda());
    // Fill post/comb once with a real pre's outputs, so the posts mix finite weights.
    ops::mhc_pre_norm(X, fn, base, scale, mp, w, np, mix, y, yn, post, comb);
    const double pre_bytes = nb(X) + nb(fn) + nb(w) + nb(y) + nb(yn) + nb(mix) + nb(post) + nb(comb);
    rows.push_back(measure(c, fmt::format("mhc pre+norm T={}", T), pre_bytes,
                           [&](int) { ops::mhc_pre_norm(X, fn, base, scale, mp, w, np, mix, y, yn, post, comb); }, o.quick));
    // In the model X is updated in place; here the timed calls keep rewriting the same X, whose
    // values stay finite (comb is doubly stochastic, post bounded).
    rows.push_back(measure(c, fmt::format("mhc post+pre+norm T={}", T), pre_bytes + nb(f) + nb(X),
                           [&](int) {
                             ops::mhc_post_pre_norm(f, X, post, comb, fn, base, scale, mp, w, np, mix, y, yn, post, comb);
                           },
                           o.quick));
    rows.push_back(measure(c, fmt::format("mhc post T={}", T), 2 * nb(X) + nb(f) + nb(post) + nb(comb),
                           [&](int) { ops::mhc_post(f, X, post, comb, X); }, o.quick));
    rows.push_back(measure(c, fmt::format("mhc head+norm T={}", T), nb(X) + nb(hfn) + nb(w) + nb(yn) + nb(hmix),
                           [&](int) { ops::mhc_head_norm(X, hfn, hbase, hscale, mp, w, np, hmix, Tensor(), yn); },
                           o.quick));
  }
  return rows;
}

std::vector<Row> run_norm(const Options& o) {
  const Ctx c = start(o, "norm");
  struct S {
    const char* name;
    int64_t cols;
  };
  const S shapes[] = {{"v4 attn/ffn_norm 4096", 4096}, {"v4 q_norm 1024", 1024}, {"v4 kv_norm 512", 512},
                      {"glm hidden 6144", 6144},      {"glm q_a 2048", 2048},   {"glm kv_a 512", 512}};
  ops::NormParams np;
  std::vector<Row> rows;
  for (const int64_t T : c.Ts) {
    for (const S& s : shapes) {
      Tensor x = bf16({T, s.cols}, 11), w = bf16({s.cols}, 12), out = Tensor::empty({T, s.cols}, DType::BF16, Device::cuda());
      rows.push_back(measure(c, fmt::format("rms_norm {} T={}", s.name, T), nb(x) + nb(w) + nb(out),
                             [&](int) { ops::rms_norm(x, w, out, np); }, o.quick));
    }
    // V4 q: 64 heads x 512 per token, unweighted norm + RoPE on the last 64, into 64 padded heads.
    const int64_t H = 64, D = 512;
    Tensor q = bf16({T, H, D}, 13), qp = Tensor::empty({T, H, D}, DType::BF16, Device::cuda());
    const Tensor pos = positions(T, 4095);
    ops::NormRopeParams nrp;
    nrp.rope = ops::RopeConfig::v4_main();
    nrp.rope_offset = D - 64;
    rows.push_back(measure(c, fmt::format("rms_norm_rope v4 q 64x512 T={}", T), nb(q) + nb(qp),
                           [&](int) { ops::rms_norm_rope(q, Tensor(), pos, qp, nrp); }, o.quick));
  }
  return rows;
}

std::vector<Row> run_rope(const Options& o) {
  const Ctx c = start(o, "rope");
  std::vector<Row> rows;
  for (const int64_t T : c.Ts) {
    const Tensor pos = positions(T, 4095);
    // GLM q: 64 heads of 256 (192 NoPE + 64 rope), the rope slice at offset 192.
    Tensor q = bf16({T, 64, 256}, 21);
    ops::RopeParams rp;
    rp.offset = 192;
    const ops::RopeConfig glm = ops::RopeConfig::glm();
    rows.push_back(measure(c, fmt::format("rope glm q 64x64 of 256 T={}", T), 2.0 * T * 64 * 64 * 2,
                           [&](int) { ops::apply_rope(q, pos, glm, rp); }, o.quick));
    // GLM indexer q: 32 heads of 128, the first 64 rotated.
    Tensor iq = bf16({T, 32, 128}, 22);
    rows.push_back(measure(c, fmt::format("rope glm indexer q 32x64 T={}", T), 2.0 * T * 32 * 64 * 2,
                           [&](int) { ops::apply_rope(iq, pos, glm, ops::RopeParams{}); }, o.quick));
    // V4 attention output: inverse rotation of o[-64:] of 64 heads x 512.
    Tensor vo = bf16({T, 64, 512}, 23);
    ops::RopeParams inv;
    inv.offset = 448;
    inv.inverse = true;
    rows.push_back(measure(c, fmt::format("rope v4 o inverse 64x64 T={}", T), 2.0 * T * 64 * 64 * 2,
                           [&](int) { ops::apply_rope(vo, pos, ops::RopeConfig::v4_main(), inv); }, o.quick));
  }
  return rows;
}

std::vector<Row> run_compressor(const Options& o) {
  const Ctx c = start(o, "compressor");
  struct S {
    const char* name;
    int64_t ratio, head_dim;
  };
  const S shapes[] = {{"v4 csa m4 d512", 4, 512}, {"v4 csa indexer m4 d128", 4, 128}, {"v4 hca m128 d512", 128, 512}};
  std::vector<Row> rows;
  for (const int64_t T : c.Ts)
    for (const S& s : shapes) {
      const ops::CompressorConfig cfg = ops::CompressorConfig::v4(s.ratio, s.head_dim);
      const int64_t W = cfg.width(), R = T;
      const size_t sb = ops::compressor_state_bytes(cfg);
      // Every request has fed 4096 - 1 tokens (its state: random finite rows) and feeds the token
      // at position 4095, which closes a window for both ratios.
      Tensor state = Tensor::empty({static_cast<int64_t>(sb) * R}, DType::U8, Device::cuda());
      Tensor sf = Tensor::from_blob(state.raw(), {static_cast<int64_t>(sb / 4) * R}, DType::F32, Device::cuda());
      ops::random_fill_f32(sf, 31, -1.f, 1.f);
      Tensor slots = Tensor::empty({R}, DType::I32), qs = Tensor::empty({R + 1}, DType::I32);
      Tensor lens = Tensor::empty({R}, DType::I32), es = Tensor::empty({R + 1}, DType::I32);
      for (int64_t r = 0; r <= R; ++r) {
        qs.data<int32_t>()[r] = static_cast<int32_t>(r);
        es.data<int32_t>()[r] = static_cast<int32_t>(r);
        if (r < R) {
          slots.data<int32_t>()[r] = static_cast<int32_t>(r);
          lens.data<int32_t>()[r] = 4095;
        }
      }
      ops::CompressorBatch b{state, slots.to(Device::cuda()), qs.to(Device::cuda()), lens.to(Device::cuda()),
                             es.to(Device::cuda())};
      Tensor kv = bf16({T, W}, 32), score = bf16({T, W}, 33), ape = f32({s.ratio, W}, 34);
      Tensor norm = bf16({s.head_dim}, 35), entries = Tensor::empty({T, s.head_dim}, DType::BF16, Device::cuda());
      // A closing step reads the request's whole state once and writes its open rows back.
      const double bytes = nb(kv) + nb(score) + nb(ape) + 2.0 * static_cast<double>(sb) * R + nb(entries);
      rows.push_back(measure(c, fmt::format("compressor {} T={}", s.name, T), bytes,
                             [&](int) { ops::compressor_forward_batch(cfg, b, kv, score, ape, norm, entries); },
                             o.quick));
    }
  return rows;
}
#else
std::vector<Row> run_mhc(const Options&) { fail("bench mhc needs a CUDA build"); }
std::vector<Row> run_norm(const Options&) { fail("bench norm needs a CUDA build"); }
std::vector<Row> run_rope(const Options&) { fail("bench rope needs a CUDA build"); }
std::vector<Row> run_compressor(const Options&) { fail("bench compressor needs a CUDA build"); }
#endif

const bool registered_mhc = add_bench("mhc", "V4 mHC ops at decode (pre+norm, post+pre+norm, post, head+norm)", run_mhc);
const bool registered_norm =
    add_bench("norm", "RMSNorm rows of V4 / GLM-5.1 and V4's fused q norm + RoPE at decode", run_norm);
const bool registered_rope = add_bench("rope", "RoPE slices of GLM-5.1 q / indexer q and V4's inverse output rotation", run_rope);
const bool registered_compressor =
    add_bench("compressor", "V4 CSA / HCA / indexer compressors over decoding requests at a closing step", run_compressor);

}  // namespace
}  // namespace dsa::bench
