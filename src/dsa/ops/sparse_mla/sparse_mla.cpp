// sparse_mla_decode: parameter checks, tactics and the device dispatch (CPU reference or CUDA).
#include "dsa/ops/sparse_mla/sparse_mla.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <limits>

#include <fmt/format.h>

#include "dsa/core/device.h"
#include "dsa/formats/kv_layout.h"
#ifdef DSA_WITH_CUDA
#include "dsa/ops/sparse_mla/cuda/portable/launch.h"
#endif

namespace dsa::ops {

int kv_cache_d_qk(formats::KvFormat k) {
  DSA_CHECK(k != formats::KvFormat::Indexer, "sparse_mla: an indexer key cache is not an attention cache");
  return k == formats::KvFormat::DsMla ? kv::ds_mla::kDim : kv::model1::kDim;
}

size_t PagedKvCache::page_bytes() const { return formats::kv_page_bytes(kind, page_size); }
int64_t PagedKvCache::num_pages() const {
  if (!data.defined() || page_size <= 0) return 0;
  return static_cast<int64_t>(data.nbytes() / page_bytes());
}

std::string SparseMlaTactic::name() const { return fmt::format("h{}_s{}", heads_per_cta, splits); }

namespace {

void validate_list(const SparseKeyList& l, const char* which, const SparseMlaParams& p) {
  const int64_t T = p.tokens();
  const auto& c = l.cache;
  DSA_CHECK(c.kind == formats::KvFormat::DsMla || c.kind == formats::KvFormat::Model1,
            "sparse_mla: {}.cache is an {} cache, not an attention cache (fp8_ds_mla or fp8_model1)", which,
            formats::kv_format_name(c.kind));
  DSA_CHECK(c.page_size >= 1 && c.page_size <= 256 && (c.page_size & (c.page_size - 1)) == 0,
            "sparse_mla: {}.cache.page_size = {} (must be a power of two in [1, 256])", which, c.page_size);
  DSA_CHECK(c.data.defined(), "sparse_mla: {}.cache.data is missing", which);
  DSA_CHECK(c.data.dtype() == DType::U8 && c.data.dim() == 1 && c.data.is_contiguous(),
            "sparse_mla: {}.cache.data must be a contiguous 1-D u8 byte buffer, got {}", which, c.data.str());
  DSA_CHECK(c.num_pages() >= 1, "sparse_mla: {}.cache.data holds {} bytes, less than one {} page of {} bytes",
            which, c.data.nbytes(), formats::kv_format_name(c.kind), c.page_bytes());
  DSA_CHECK(c.num_slots() <= std::numeric_limits<int32_t>::max(),
            "sparse_mla: {}.cache has {} slots (at most 2^31-1 supported)", which, c.num_slots());
  DSA_CHECK(reinterpret_cast<uintptr_t>(c.data.raw()) % 16 == 0,
            "sparse_mla: {}.cache.data must be 16-byte aligned", which);
  DSA_CHECK(c.data.device() == p.q.device(), "sparse_mla: {}.cache.data is on {} but q is on {}", which,
            c.data.device().str(), p.q.device().str());
  DSA_CHECK(l.indices.defined(), "sparse_mla: {}.indices is missing", which);
  DSA_CHECK(l.indices.dtype() == DType::I32 && l.indices.dim() == 2 && l.indices.size(0) == T &&
                l.indices.size(1) >= 1 && l.indices.is_contiguous(),
            "sparse_mla: {}.indices must be contiguous i32 [T={}][K>=1], got {}", which, T, l.indices.str());
  DSA_CHECK(l.indices.device() == p.q.device(), "sparse_mla: {}.indices is on {} but q is on {}", which,
            l.indices.device().str(), p.q.device().str());
  if (l.lengths.defined()) {
    DSA_CHECK(l.lengths.dtype() == DType::I32 && l.lengths.dim() == 1 && l.lengths.size(0) == T &&
                  l.lengths.is_contiguous(),
              "sparse_mla: {}.lengths must be contiguous i32 [T={}], got {}", which, T, l.lengths.str());
    DSA_CHECK(l.lengths.device() == p.q.device(), "sparse_mla: {}.lengths is on {} but q is on {}", which,
              l.lengths.device().str(), p.q.device().str());
  }
}

}  // namespace

void SparseMlaParams::validate() const {
  DSA_CHECK(q.defined(), "sparse_mla: q is missing");
  DSA_CHECK(q.dtype() == DType::BF16 && q.dim() == 3 && q.is_contiguous(),
            "sparse_mla: q must be contiguous bf16 [T][H][d_qk], got {}", q.str());
  const int64_t T = tokens();
  const int H = heads();
  DSA_CHECK(T >= 1, "sparse_mla: q has T = {} tokens (need >= 1)", T);
  DSA_CHECK(T <= std::numeric_limits<int32_t>::max(), "sparse_mla: q has T = {} tokens (too many)", T);
  DSA_CHECK(H == 16 || H == 32 || H == 64 || H == 128,
            "sparse_mla: q has H = {} heads; supported head counts are 16, 32, 64, 128 (pad to one of them)", H);
  DSA_CHECK(q.size(2) == d_qk(), "sparse_mla: q has d_qk = {} but a {} cache needs d_qk = {}", q.size(2),
            formats::kv_format_name(main.cache.kind), d_qk());
  validate_list(main, "main", *this);
  if (extra) {
    DSA_CHECK(extra->cache.kind == main.cache.kind, "sparse_mla: extra.cache.kind = {} differs from main.cache.kind = {}",
              formats::kv_format_name(extra->cache.kind), formats::kv_format_name(main.cache.kind));
    validate_list(*extra, "extra", *this);
  }
  if (sink.defined()) {
    DSA_CHECK(sink.dtype() == DType::F32 && sink.dim() == 1 && sink.size(0) == H && sink.is_contiguous(),
              "sparse_mla: sink must be contiguous f32 [H={}], got {}", H, sink.str());
    DSA_CHECK(sink.device() == q.device(), "sparse_mla: sink is on {} but q is on {}", sink.device().str(),
              q.device().str());
  }
  DSA_CHECK(std::isfinite(softmax_scale) && softmax_scale > 0.f, "sparse_mla: softmax_scale = {} (must be finite and > 0)",
            softmax_scale);
  DSA_CHECK(o.defined() && o.dtype() == DType::BF16 && o.dim() == 3 && o.size(0) == T && o.size(1) == H &&
                o.size(2) == kSparseMlaDv && o.is_contiguous(),
            "sparse_mla: o must be contiguous bf16 [T={}][H={}][512], got {}", T, H, o.defined() ? o.str() : "nothing");
  DSA_CHECK(lse.defined() && lse.dtype() == DType::F32 && lse.dim() == 2 && lse.size(0) == T && lse.size(1) == H &&
                lse.is_contiguous(),
            "sparse_mla: lse must be contiguous f32 [T={}][H={}], got {}", T, H, lse.defined() ? lse.str() : "nothing");
  DSA_CHECK(o.device() == q.device() && lse.device() == q.device(), "sparse_mla: o/lse must be on q's device {}",
            q.device().str());
}

namespace {
constexpr int kKeysPerTile = 32;  // keys per pipeline stage of the CUDA kernel
int64_t total_keys(const SparseMlaParams& p) {
  return p.main.indices.size(1) + (p.extra ? p.extra->indices.size(1) : 0);
}
// Split partials take T * H * splits * 2 KB of device workspace; splits whose workspace would
// exceed 1 GiB are not offered (they only pay off at small T anyway).
constexpr int64_t kMaxWorkspaceBytes = int64_t{1} << 30;
bool workspace_ok(const SparseMlaParams& p, int splits) {
  return splits == 1 || p.tokens() * p.heads() * splits * (kSparseMlaDv + 1) * 4 <= kMaxWorkspaceBytes;
}
}  // namespace

std::vector<SparseMlaTactic> sparse_mla_tactics(const SparseMlaParams& p) {
  std::vector<SparseMlaTactic> out;
  const int64_t tiles = (total_keys(p) + kKeysPerTile - 1) / kKeysPerTile;
  for (int hpc : {16, 32}) {
    if (p.heads() % hpc != 0) continue;
    for (int s : {1, 2, 4, 8, 16, 32})
      if (s == 1 || (s <= tiles && workspace_ok(p, s))) out.push_back({hpc, s});
  }
  return out;
}

SparseMlaTactic sparse_mla_default_tactic(const SparseMlaParams& p, int sm_count) {
  SparseMlaTactic t;
  t.heads_per_cta = p.heads() >= 32 ? 32 : 16;
  const int64_t ctas = p.tokens() * (p.heads() / t.heads_per_cta);
  const int64_t tiles = (total_keys(p) + kKeysPerTile - 1) / kKeysPerTile;
  // Aim at about one CTA per SM (one fits per SM: registers), keeping at least 2 key tiles per
  // split. On the H200 (2026-11-30 sweep, docs/perf/attention-2026-11-30.md) this picks the
  // fastest split count of every benchmark shape with T >= 8; at T = 1 the tuner can still gain
  // up to 15% (e.g. 16 heads per CTA for V4-Flash).
  int64_t want = (std::max(sm_count, 1) + ctas - 1) / ctas;
  int64_t cap = std::max<int64_t>(1, tiles / 2);
  int s = 1;
  while (s * 2 <= std::min<int64_t>(want, std::min<int64_t>(cap, 32)) && workspace_ok(p, s * 2)) s *= 2;
  t.splits = s;
  return t;
}

std::optional<std::string> sparse_mla_cuda_unsupported_reason(const SparseMlaParams& p, int device) {
#ifdef DSA_WITH_CUDA
  (void)p;
  return sparse_mla_cuda::unsupported_reason(device);
#else
  (void)p;
  (void)device;
  return std::string("this build of dsa has no CUDA");
#endif
}

namespace {
std::atomic<int> g_last_launched{0};  // heads_per_cta * 100 + splits of the last CUDA launch
}  // namespace

SparseMlaTactic sparse_mla_last_launched_tactic() {
  const int v = g_last_launched.load(std::memory_order_relaxed);
  return SparseMlaTactic{v / 100, v % 100};
}

void sparse_mla_decode(const SparseMlaParams& p, int tactic) {
  p.validate();
  if (!p.q.device().is_cuda()) {
    sparse_mla_reference(p);
    return;
  }
#ifdef DSA_WITH_CUDA
  const int dev = p.q.device().index;
  SparseMlaTactic t;
  if (tactic < 0) {
    const auto& devs = cuda_devices();
    int sms = dev < static_cast<int>(devs.size()) ? devs[dev].sm_count : 132;
    t = sparse_mla_default_tactic(p, sms);
  } else {
    auto all = sparse_mla_tactics(p);
    DSA_CHECK(tactic < static_cast<int>(all.size()), "sparse_mla: tactic {} out of range ({} tactics for these params)",
              tactic, all.size());
    t = all[tactic];
  }
  g_last_launched.store(t.heads_per_cta * 100 + t.splits, std::memory_order_relaxed);
  sparse_mla_cuda::launch(p, t);
#else
  (void)tactic;
  fail("sparse_mla: tensors are on {} but this build of dsa has no CUDA", p.q.device().str());
#endif
}

}  // namespace dsa::ops
