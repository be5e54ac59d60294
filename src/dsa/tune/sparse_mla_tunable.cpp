#include "dsa/ops/sparse_mla/random_cache.h"
#include "dsa/tune/sparse_mla_tunable.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include <fmt/format.h>

#include "dsa/core/device.h"
#include "dsa/core/dtype_conv.h"
#include "dsa/core/error.h"
#include "dsa/formats/kv_layout.h"

namespace dsa::tune {


void SparseMlaTuneConfig::validate() const {
  DSA_CHECK(heads > 0, "sparse_mla tuning: heads = {}", heads);
  DSA_CHECK(main_keys > 0, "sparse_mla tuning: main_keys = {}", main_keys);
  DSA_CHECK(extra_keys >= 0, "sparse_mla tuning: extra_keys = {}", extra_keys);
  DSA_CHECK(extra_key_buckets.empty() || extra_keys == 0,
            "sparse_mla tuning: give either a fixed extra_keys or extra_key_buckets, not both");
  for (auto b : extra_key_buckets) DSA_CHECK(b > 0, "sparse_mla tuning: extra key bucket {}", b);
  DSA_CHECK(std::is_sorted(extra_key_buckets.begin(), extra_key_buckets.end()),
            "sparse_mla tuning: extra_key_buckets must ascend");
  DSA_CHECK(cache_bytes > 0, "sparse_mla tuning: cache_bytes = 0");
}

SparseMlaTunable::SparseMlaTunable(SparseMlaTuneConfig c) : cfg_(std::move(c)) {
  cfg_.validate();
  if (cfg_.l2_bytes == 0 && cfg_.device.is_cuda()) {
    const auto& devs = cuda_devices();
    if (cfg_.device.index < static_cast<int>(devs.size())) cfg_.l2_bytes = devs[cfg_.device.index].l2_bytes;
  }
}

std::string SparseMlaTunable::instance_key() const {
  std::string k = fmt::format("{}.h{}.k{}.p{}", formats::kv_format_name(cfg_.kind), cfg_.heads, cfg_.main_keys,
                              cfg_.main_page);
  if (cfg_.extra_keys > 0) k += fmt::format(".x{}.p{}", cfg_.extra_keys, cfg_.extra_page);
  if (!cfg_.extra_key_buckets.empty()) k += fmt::format(".xall.p{}", cfg_.extra_page);
  if (cfg_.sink) k += ".sink";
  return k;
}

// The tactic lists the op offers for a wide key list, per head count: they change whenever the
// op changes its tactic space (ids are indices into that list). Computed once per process.
std::string SparseMlaTunable::signature() const {
  static const std::string sig = [] {
    std::string s = "sparse_mla:id=hpc*100+splits:";
    for (int h : {16, 32, 64, 128}) {
      ops::SparseMlaParams p;
      p.q = Tensor::empty({1, h, 576}, DType::BF16);
      p.main.indices = Tensor::empty({1, 1 << 16}, DType::I32);
      s += fmt::format("H{}=", h);
      for (const auto& t : ops::sparse_mla_tactics(p)) s += t.name() + ",";
      s += ";";
    }
    return s;
  }();
  return sig;
}

std::vector<std::string> SparseMlaTunable::dim_names() const {
  if (cfg_.extra_key_buckets.empty()) return {"tokens"};
  return {"tokens", "keys"};
}

int64_t SparseMlaTunable::bucket_dim(size_t, int64_t value) const {
  for (int64_t b : cfg_.extra_key_buckets)
    if (value <= b) return b;
  return cfg_.extra_key_buckets.back();
}

std::vector<std::vector<int64_t>> SparseMlaTunable::other_dim_buckets() const {
  if (cfg_.extra_key_buckets.empty()) return {};
  return {cfg_.extra_key_buckets};
}

int64_t SparseMlaTunable::extra_width(const Dims& dims) const {
  if (!cfg_.extra_key_buckets.empty()) return dims.at(1);
  return cfg_.extra_keys;
}

// Metadata-only params: the tensors borrow a dummy pointer that is never read (the tactic list
// depends on shapes only), so even prefill-sized T costs no memory.
ops::SparseMlaParams SparseMlaTunable::shape_params(int64_t tokens, int64_t extra_keys) const {
  static char dummy alignas(16)[16];
  ops::SparseMlaParams p;
  p.q = Tensor::from_blob(dummy, {tokens, cfg_.heads, ops::kv_cache_d_qk(cfg_.kind)}, DType::BF16);
  p.main.cache.kind = cfg_.kind;
  p.main.cache.page_size = cfg_.main_page;
  p.main.indices = Tensor::from_blob(dummy, {tokens, cfg_.main_keys}, DType::I32);
  if (extra_keys > 0) {
    p.extra.emplace();
    p.extra->cache.kind = cfg_.kind;
    p.extra->cache.page_size = cfg_.extra_page;
    p.extra->indices = Tensor::from_blob(dummy, {tokens, extra_keys}, DType::I32);
  }
  return p;
}

int sparse_mla_tune_id(const ops::SparseMlaTactic& t) { return t.heads_per_cta * 100 + t.splits; }

int sparse_mla_op_tactic(const ops::SparseMlaParams& p, int tune_id) {
  if (tune_id == kDefaultTactic) return kDefaultTactic;
  auto list = ops::sparse_mla_tactics(p);
  for (size_t i = 0; i < list.size(); ++i)
    if (sparse_mla_tune_id(list[i]) == tune_id) return static_cast<int>(i);
  return kDefaultTactic;
}

std::vector<Tactic> SparseMlaTunable::tactics(const Dims& dims) const {
  std::vector<Tactic> out{{kDefaultTactic, "default (heuristic)"}};
  for (const auto& t : ops::sparse_mla_tactics(shape_params(dims.at(0), extra_width(dims))))
    out.push_back({sparse_mla_tune_id(t), t.name()});
  return out;
}

namespace {

// A cache of `bytes` (whole pages) of valid random FP8 rows: a host template of up to 64 pages,
// tiled, then copied to `dev` (values: ops/sparse_mla/random_cache.h).
ops::PagedKvCache make_cache(formats::KvFormat kind, int page, size_t bytes, Device dev, std::mt19937_64& gen) {
  ops::PagedKvCache c;
  c.kind = kind;
  c.page_size = page;
  const size_t pb = c.page_bytes();
  const int64_t pages = std::max<int64_t>(1, static_cast<int64_t>(bytes / pb));
  const int64_t tmpl_pages = std::min<int64_t>(pages, 64);
  std::vector<uint8_t> h(pb * tmpl_pages, 0);
  ops::fill_random_kv_pages(kind, page, h.data(), tmpl_pages, ops::RandomKvScales::Fixed, gen);
  Tensor host = Tensor::empty({static_cast<int64_t>(pb * pages)}, DType::U8);
  for (int64_t p0 = 0; p0 < pages; p0 += tmpl_pages) {
    const int64_t n = std::min(tmpl_pages, pages - p0);
    std::memcpy(host.data<uint8_t>() + p0 * pb, h.data(), n * pb);
  }
  c.data = host.to(dev);
  return c;
}

Tensor random_indices(int64_t tokens, int64_t k, int64_t slots, Device dev, std::mt19937_64& gen) {
  Tensor t = Tensor::empty({tokens, k}, DType::I32);
  std::uniform_int_distribution<int64_t> ud(0, slots - 1);
  int32_t* d = t.data<int32_t>();
  for (int64_t i = 0; i < tokens * k; ++i) d[i] = static_cast<int32_t>(ud(gen));
  return t.to(dev);
}

size_t row_bytes(formats::KvFormat k) {
  return k == formats::KvFormat::DsMla ? kv::ds_mla::kTokenBytes : kv::model1::kLogicalBytes;
}

}  // namespace

void SparseMlaTunable::prepare(const Dims& dims) {
  const int64_t T = dims.at(0);
  const int64_t xk = extra_width(dims);
  std::mt19937_64 gen(0x5eed + T * 131 + xk);
  if (!main_cache_.data.defined())
    main_cache_ = make_cache(cfg_.kind, cfg_.main_page, cfg_.cache_bytes, cfg_.device, gen);
  if (xk > 0 && !extra_cache_.data.defined())
    extra_cache_ = make_cache(cfg_.kind, cfg_.extra_page, cfg_.cache_bytes, cfg_.device, gen);
  // Index sets: enough that one pass over them touches > 2x the L2 (at most 64 sets).
  const double call_bytes = static_cast<double>(T) * (cfg_.main_keys + xk) * row_bytes(cfg_.kind);
  const int nsets = cfg_.l2_bytes ? static_cast<int>(std::clamp(std::ceil(2.0 * cfg_.l2_bytes / call_bytes), 1.0, 64.0))
                                  : 1;
  Tensor q_host = Tensor::empty({T, cfg_.heads, ops::kv_cache_d_qk(cfg_.kind)}, DType::BF16);
  std::normal_distribution<float> nd;
  for (int64_t i = 0; i < q_host.numel(); ++i) q_host.data<uint16_t>()[i] = f32_to_bf16_bits(nd(gen));
  Tensor q = q_host.to(cfg_.device);
  Tensor o = Tensor::empty({T, cfg_.heads, ops::kSparseMlaDv}, DType::BF16, cfg_.device);
  Tensor lse = Tensor::empty({T, cfg_.heads}, DType::F32, cfg_.device);
  Tensor sink;
  if (cfg_.sink) {
    Tensor s = Tensor::empty({cfg_.heads}, DType::F32);
    for (int h = 0; h < cfg_.heads; ++h) s.data<float>()[h] = nd(gen);
    sink = s.to(cfg_.device);
  }
  sets_.clear();
  for (int i = 0; i < nsets; ++i) {
    ops::SparseMlaParams p;
    p.q = q;
    p.main.cache = main_cache_;
    p.main.indices = random_indices(T, cfg_.main_keys, main_cache_.num_slots(), cfg_.device, gen);
    if (xk > 0) {
      p.extra.emplace();
      p.extra->cache = extra_cache_;
      p.extra->indices = random_indices(T, xk, extra_cache_.num_slots(), cfg_.device, gen);
    }
    p.sink = sink;
    p.softmax_scale = 1.f / std::sqrt(static_cast<float>(ops::kv_cache_d_qk(cfg_.kind)));
    p.o = o;
    p.lse = lse;
    p.validate();
    sets_.push_back(std::move(p));
  }
  next_set_ = last_set_ = 0;
}

void SparseMlaTunable::run(int tactic, const Dims& dims) {
  DSA_CHECK(!sets_.empty() && sets_[0].tokens() == dims.at(0), "sparse_mla tuning: run before prepare({})",
            dims.at(0));
  const ops::SparseMlaParams& p = sets_[next_set_];
  int index = sparse_mla_op_tactic(p, tactic);
  DSA_CHECK(tactic == kDefaultTactic || index != kDefaultTactic,
            "sparse_mla tuning: tactic {} is not offered for T={}", tactic, p.tokens());
  last_set_ = next_set_;
  next_set_ = (next_set_ + 1) % sets_.size();
  ops::sparse_mla_decode(p, index);
}

void SparseMlaTunable::release() {
  sets_.clear();  // the caches stay for the next bucket
}

std::vector<std::unique_ptr<TunableOp>> make_sparse_mla_tunables(const PlanModel& model, const EngineLimits&,
                                                                 int device) {
  std::vector<std::unique_ptr<TunableOp>> out;
  for (const auto& a : model.attention) {
    SparseMlaTuneConfig c;
    c.device = Device::cuda(device);
    // The forwards pad the query heads to the kernel's head counts (16, 32, 64, 128; the
    // padded heads are zero): tune, and key the cache, for the count that actually runs.
    c.heads = a.num_heads;
    for (int h : {16, 32, 64, 128})
      if (a.num_heads <= h) {
        c.heads = h;
        break;
      }
    c.sink = a.sink;
    switch (a.kind) {
      case attn::LayerKind::MlaSparse:  // GLM-5.x: top-k over the latent cache, pages of 64
        c.kind = formats::KvFormat::DsMla;
        c.main_keys = a.topk;
        c.main_page = 64;
        break;
      case attn::LayerKind::Sliding:  // V4: the window only (SWA pages of 256 = the V4 block size)
      case attn::LayerKind::Csa:      // + top-k compressed entries (256/4 per page)
      case attn::LayerKind::Hca:      // + every compressed entry (256/128 per page)
        c.kind = formats::KvFormat::Model1;
        c.main_keys = a.window;
        c.main_page = 256;
        if (a.kind == attn::LayerKind::Csa) {
          c.extra_keys = a.topk;
          c.extra_page = 64;
        } else if (a.kind == attn::LayerKind::Hca) {
          c.extra_page = 2;
          const int64_t max_entries = std::max<int64_t>(64, (model.max_position + 127) / 128);
          for (int64_t b = 64; b < max_entries; b *= 4) c.extra_key_buckets.push_back(b);
          c.extra_key_buckets.push_back(max_entries);
        }
        break;
    }
    out.push_back(std::make_unique<SparseMlaTunable>(c));
  }
  return out;
}

}  // namespace dsa::tune
