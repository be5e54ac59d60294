// `dsa bench indexer`: the lightning indexer of a decode step at long context, the part of a
// step that grows with the context: scores of every visible entry from the paged FP8 key cache
// (indexer_scores_paged) and the top-k over them (topk_select), with the top-k's paths (one CTA
// per row over global memory, the old path; the wide selection; the register-resident fast path
// for rows of <= 16384 entries) timed on the same scores. Shapes: the V4-Flash CSA indexer (64
// heads, top 512 of context / 4 entries) at 4K-1M tokens, V4-Pro's top 1024 at 64K, and GLM-5.1's
// (32 heads, top 2048 of every token) at 4K (4109: a 4K prompt and a few generated tokens) to
// 200K. Floor: the key bytes the scores read (132 B per entry) at the copy bandwidth measured in
// the same run.
#include <cstdio>

#include "bench/bench.h"
#include "bench/bench_util_gpu.h"
#include "dsa/core/device.h"
#include "dsa/core/error.h"
#include "dsa/formats/kv_layout.h"
#include "dsa/ops/indexer/indexer.h"
#include "dsa/ops/moe/random_fill.h"

namespace dsa::bench {
namespace {

#ifdef DSA_WITH_CUDA
struct Shape {
  const char* name;
  int64_t heads, entries, topk, ratio;
};

std::vector<Row> run(const Options& o) {
  DSA_CHECK(!cuda_devices().empty(), "bench indexer needs a CUDA device");
  DSA_CUDA_CHECK(cudaSetDevice(o.device));
  const double copy_gbs = measured_copy_gbs();
  std::printf("measured copy bandwidth %.0f GB/s (read + write)\n", copy_gbs);
  const Shape shapes[] = {{"v4 csa 4K", 64, 1024, 512, 4},       {"v4 csa 16K", 64, 4096, 512, 4},
                          {"v4 csa 32K", 64, 8192, 512, 4},      {"v4 csa 64K", 64, 16384, 512, 4},
                          {"v4 pro csa 64K", 64, 16384, 1024, 4}, {"v4 csa 128K", 64, 32768, 512, 4},
                          {"v4 csa 1M", 64, 262144, 512, 4},     {"glm 4K", 32, 4109, 2048, 1},
                          {"glm 16K", 32, 16384, 2048, 1},       {"glm 128K", 32, 131072, 2048, 1},
                          {"glm 200K", 32, 202752, 2048, 1}};
  const std::vector<int64_t> Ts = o.quick ? std::vector<int64_t>{1} : std::vector<int64_t>{1, 8};
  const Device d = Device::cuda();
  constexpr int kPage = 64;
  std::vector<Row> rows;
  for (const Shape& s : shapes)
    for (const int64_t T : Ts) {
      // Every token its own request holding `entries` entries; each token sees all of them.
      const int64_t blocks = (s.entries + kPage - 1) / kPage;
      Tensor cache = Tensor::empty({static_cast<int64_t>(T * blocks * kv::indexer::page_bytes(kPage))}, DType::U8, d);
      // Bytes below 0x40: finite positive e4m3 keys and positive f32 scales (no NaN anywhere).
      ops::random_fill_bytes(cache, 11, 0, 63);
      Tensor table = Tensor::empty({T, blocks}, DType::I32);
      for (int64_t i = 0; i < T * blocks; ++i) table.data<int32_t>()[i] = static_cast<int32_t>(i);
      Tensor req = Tensor::empty({T}, DType::I32), pos = Tensor::empty({T}, DType::I32);
      for (int64_t t = 0; t < T; ++t) {
        req.data<int32_t>()[t] = static_cast<int32_t>(t);
        pos.data<int32_t>()[t] = static_cast<int32_t>(s.entries * s.ratio - 1);
      }
      const ops::PagedIndexerKeys keys{cache, kPage, table.to(d), req.to(d)};
      Tensor q = Tensor::empty({T, s.heads, kv::indexer::kDim}, DType::BF16, d);
      Tensor w = Tensor::empty({T, s.heads}, DType::BF16, d);
      ops::random_fill_bf16(q, 12, 1.f);
      ops::random_fill_bf16(w, 13, 1.f);
      const Tensor pd = pos.to(d);
      ops::IndexerParams p = s.ratio == 4 ? ops::IndexerParams::v4(s.topk, s.heads) : ops::IndexerParams::glm(s.topk, s.heads);
      Tensor scores = Tensor::empty({T, s.entries}, DType::F32, d);
      Tensor idx = Tensor::empty({T, s.topk}, DType::I32, d);
      const int reps = 30;
      const double score_us = time_us([&](int) { ops::indexer_scores_paged(q, keys, w, pd, p, scores); }, 3, reps);
      p.select = ops::TopkSelectPath::PerRow;
      const double row_us = time_us([&](int) { ops::topk_select(scores, pd, p, idx); }, 3, reps);
      p.select = ops::TopkSelectPath::Wide;
      const double wide_us = time_us([&](int) { ops::topk_select(scores, pd, p, idx); }, 3, reps);
      const bool fast_ok = s.entries <= ops::kTopkSelectFastMaxEntries;
      double fast_us = 0;
      if (fast_ok) {
        p.select = ops::TopkSelectPath::Fast;
        fast_us = time_us([&](int) { ops::topk_select(scores, pd, p, idx); }, 3, reps);
      }
      p.select = ops::TopkSelectPath::Auto;
      const ops::TopkSelectPath path = ops::topk_select_path(T, s.entries, p.select);
      const bool wide = path == ops::TopkSelectPath::Wide;
      const double select_us = path == ops::TopkSelectPath::Fast ? fast_us : wide ? wide_us : row_us;
      const char* path_name = path == ops::TopkSelectPath::Fast ? "fast" : wide ? "wide" : "per row";
      const double key_bytes = static_cast<double>(T * s.entries) * kv::indexer::kEntryBytes;
      const double floor_us = key_bytes / (copy_gbs * 1e9) * 1e6;
      Row r;
      r.name = fmt::format("{} T={}", s.name, T);
      r.us = score_us + select_us;
      r.gbs = key_bytes / (r.us * 1e-6) / 1e9;
      r.roofline_pct = floor_us / r.us * 100;
      r.tflops = 2.0 * static_cast<double>(T * s.entries * s.heads * kv::indexer::kDim) / (score_us * 1e-6) / 1e12;
      r.extra["score_us"] = score_us;
      r.extra["select_row_us"] = row_us;
      r.extra["select_wide_us"] = wide_us;
      if (fast_ok) r.extra["select_fast_us"] = fast_us;
      r.extra["auto"] = path_name;
      r.extra["wide_speedup"] = row_us / wide_us;
      if (fast_ok) r.extra["fast_speedup"] = row_us / fast_us;
      r.extra["floor_us"] = floor_us;
      rows.push_back(r);
      std::printf("%s: scores %.1f us, top-%lld per row (old) %.1f us, wide %.1f us, fast %s (auto: %s)\n", r.name.c_str(),
                  score_us, static_cast<long long>(s.topk), row_us, wide_us,
                  fast_ok ? fmt::format("{:.1f} us", fast_us).c_str() : "-", path_name);
      std::fflush(stdout);
    }
  return rows;
}
#else
std::vector<Row> run(const Options&) { fail("bench indexer needs a CUDA build"); }
#endif

const bool registered =
    add_bench("indexer", "Decode-step indexer: paged FP8 scores and the top-k (old per-row vs wide vs fast selection)", run);

}  // namespace
}  // namespace dsa::bench
