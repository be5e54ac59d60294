// Validation, CPU reference and CUDA dispatch of the KV-cache insert/gather ops (kv_cache_ops.h).
#include "dsa/formats/kv_cache_ops.h"

#include <cstring>

#include "dsa/formats/kv_layout.h"
#include "dsa/formats/quant_math.h"
#ifdef DSA_WITH_CUDA
#include "dsa/formats/cuda/launchers.h"
#endif

namespace dsa::formats {

std::string_view kv_format_name(KvFormat f) {
  switch (f) {
    case KvFormat::DsMla: return "fp8_ds_mla";
    case KvFormat::Model1: return "fp8_model1";
    case KvFormat::Indexer: return "indexer_fp8";
  }
  return "?";
}

int kv_row_dim(KvFormat f) {
  switch (f) {
    case KvFormat::DsMla: return kv::ds_mla::kDim;
    case KvFormat::Model1: return kv::model1::kDim;
    case KvFormat::Indexer: return kv::indexer::kDim;
  }
  fail("kv_row_dim: unknown KV format code {}", static_cast<int>(f));
}

size_t kv_page_bytes(KvFormat f, int page_size) {
  switch (f) {
    case KvFormat::DsMla: return kv::ds_mla::page_bytes(page_size);
    case KvFormat::Model1: return kv::model1::page_bytes(page_size);
    case KvFormat::Indexer: return kv::indexer::page_bytes(page_size);
  }
  fail("kv_page_bytes: unknown KV format code {}", static_cast<int>(f));
}

namespace {

// Checks shared by insert and gather: page size, cache buffer, slots. `op` names the call.
void check_cache_and_slots(std::string_view op, KvFormat f, int page_size, const Tensor& cache, const Tensor& slots) {
  const auto name = kv_format_name(f);
  DSA_CHECK(f == KvFormat::DsMla || f == KvFormat::Model1 || f == KvFormat::Indexer, "{}: unknown format code {}",
            op, static_cast<int>(f));
  DSA_CHECK(page_size > 0 && page_size <= (1 << 20), "{} ({}): page_size must be in [1, 2^20], got {}", op, name,
            page_size);
  DSA_CHECK(cache.defined(), "{} ({}): cache tensor is missing", op, name);
  DSA_CHECK(cache.dtype() == DType::U8 || cache.dtype() == DType::I8,
            "{} ({}): cache must be a u8 byte buffer, got dtype {}", op, name, dtype_name(cache.dtype()));
  DSA_CHECK(cache.is_contiguous(), "{} ({}): cache {} must be contiguous", op, name, cache.str());
  const size_t pb = kv_page_bytes(f, page_size);
  DSA_CHECK(cache.nbytes() % pb == 0,
            "{} ({}): cache has {} bytes, not a whole number of pages of {} bytes (page_size {})", op, name,
            cache.nbytes(), pb, page_size);
  DSA_CHECK(slots.defined(), "{} ({}): slots tensor is missing", op, name);
  DSA_CHECK(slots.dtype() == DType::I64, "{} ({}): slots must be i64, got {}", op, name, dtype_name(slots.dtype()));
  DSA_CHECK(slots.dim() == 1 && slots.is_contiguous(), "{} ({}): slots must be a contiguous 1-D tensor, got {}", op,
            name, slots.str());
  DSA_CHECK(slots.device() == cache.device(), "{} ({}): slots on {} but cache on {}", op, name,
            slots.device().str(), cache.device().str());
}

// CPU only: every slot is -1 or a valid slot; names the first bad row.
void check_slot_values(std::string_view op, KvFormat f, const Tensor& slots, int64_t num_slots) {
  const int64_t* s = slots.data<int64_t>();
  for (int64_t i = 0; i < slots.size(0); ++i)
    DSA_CHECK(s[i] == -1 || (s[i] >= 0 && s[i] < num_slots),
              "{} ({}): slots[{}] = {} is outside the cache (valid: -1 or [0, {}))", op, kv_format_name(f), i, s[i],
              num_slots);
}

float load_f32(const uint8_t* p) {
  float v;
  std::memcpy(&v, p, 4);
  return v;
}
void store_f32(uint8_t* p, float v) { std::memcpy(p, &v, 4); }

float bf16_at(const uint16_t* row, int i) { return bf16_bits_to_f32(row[i]); }

// Quantizes `n` values of `src` (bf16 bits) as one e4m3 group with the given scale into dst.
void quantize_group(const uint16_t* src, int n, float scale, uint8_t* dst) {
  for (int i = 0; i < n; ++i) dst[i] = quantize_e4m3(bf16_at(src, i), scale);
}
float group_amax(const uint16_t* src, int n) {
  float amax = 0.f;
  for (int i = 0; i < n; ++i) amax = amax_update(amax, bf16_at(src, i));
  return amax;
}

// ---- per-format row insert (CPU reference) ----
void ds_mla_insert_row(const uint16_t* src, uint8_t* cache, int64_t slot, bool pow2) {
  namespace L = kv::ds_mla;
  uint8_t* t = cache + L::token_offset(slot);
  for (int g = 0; g < L::kGroups; ++g) {
    const float scale = e4m3_scale(group_amax(src + g * L::kGroup, L::kGroup), pow2);
    quantize_group(src + g * L::kGroup, L::kGroup, scale, t + g * L::kGroup);
    store_f32(t + L::kScaleOffset + 4 * g, scale);
  }
  std::memcpy(t + L::kRopeOffset, src + L::kNope, L::kRope * 2);
}

void model1_insert_row(const uint16_t* src, uint8_t* cache, int64_t slot, int page_size) {
  namespace L = kv::model1;
  uint8_t* t = cache + L::data_offset(slot, page_size);
  uint8_t* sc = cache + L::scale_offset(slot, page_size);
  for (int g = 0; g < L::kGroups; ++g) {
    const uint8_t e = e4m3_scale_ue8m0(group_amax(src + g * L::kGroup, L::kGroup));
    quantize_group(src + g * L::kGroup, L::kGroup, ue8m0_to_f32(e), t + g * L::kGroup);
    sc[g] = e;
  }
  sc[L::kGroups] = 0;  // the footer's pad byte
  std::memcpy(t + L::kRopeOffset, src + L::kNope, L::kRope * 2);
  if (slot % page_size == 0) {  // the page's first token also clears the page tail padding
    uint8_t* page = cache + static_cast<size_t>(slot / page_size) * L::page_bytes(page_size);
    const size_t used = static_cast<size_t>(page_size) * L::kLogicalBytes;
    std::memset(page + used, 0, L::page_bytes(page_size) - used);
  }
}

void indexer_insert_row(const uint16_t* src, uint8_t* cache, int64_t slot, int page_size, bool pow2) {
  namespace L = kv::indexer;
  const float scale = e4m3_scale(group_amax(src, L::kDim), pow2);
  quantize_group(src, L::kDim, scale, cache + L::key_offset(slot, page_size));
  store_f32(cache + L::scale_offset(slot, page_size), scale);
}

// ---- per-format row dequant (CPU reference): fills vals[kv_row_dim] ----
void ds_mla_row(const uint8_t* cache, int64_t slot, float* v) {
  namespace L = kv::ds_mla;
  const uint8_t* t = cache + L::token_offset(slot);
  for (int i = 0; i < L::kNope; ++i) v[i] = dequantize_e4m3(t[i], load_f32(t + L::kScaleOffset + 4 * (i / L::kGroup)));
  const auto* rope = reinterpret_cast<const uint16_t*>(t + L::kRopeOffset);
  for (int i = 0; i < L::kRope; ++i) v[L::kNope + i] = bf16_bits_to_f32(rope[i]);
}

void model1_row(const uint8_t* cache, int64_t slot, int page_size, float* v) {
  namespace L = kv::model1;
  const uint8_t* t = cache + L::data_offset(slot, page_size);
  const uint8_t* sc = cache + L::scale_offset(slot, page_size);
  for (int i = 0; i < L::kNope; ++i) v[i] = dequantize_e4m3(t[i], ue8m0_to_f32(sc[i / L::kGroup]));
  const auto* rope = reinterpret_cast<const uint16_t*>(t + L::kRopeOffset);
  for (int i = 0; i < L::kRope; ++i) v[L::kNope + i] = bf16_bits_to_f32(rope[i]);
}

void indexer_row(const uint8_t* cache, int64_t slot, int page_size, float* v) {
  namespace L = kv::indexer;
  const uint8_t* k = cache + L::key_offset(slot, page_size);
  const float scale = load_f32(cache + L::scale_offset(slot, page_size));
  for (int i = 0; i < L::kDim; ++i) v[i] = dequantize_e4m3(k[i], scale);
}

}  // namespace

int64_t KvInsertParams::num_pages() const {
  return static_cast<int64_t>(cache.nbytes() / kv_page_bytes(format, page_size));
}
int64_t KvGatherParams::num_pages() const {
  return static_cast<int64_t>(cache.nbytes() / kv_page_bytes(format, page_size));
}

void KvInsertParams::validate() const {
  check_cache_and_slots("kv_insert", format, page_size, cache, slots);
  const auto name = kv_format_name(format);
  const int dim = kv_row_dim(format);
  DSA_CHECK(kv.defined(), "kv_insert ({}): kv tensor is missing", name);
  DSA_CHECK(kv.dtype() == DType::BF16, "kv_insert ({}): kv must be bf16, got {}", name, dtype_name(kv.dtype()));
  DSA_CHECK(kv.dim() == 2 && kv.size(1) == dim, "kv_insert ({}): kv must be [N][{}], got {}", name, dim, kv.str());
  DSA_CHECK(kv.size(0) <= 1 || kv.stride(1) == 1, "kv_insert ({}): kv rows must be contiguous (stride(1) == 1), got {}",
            name, kv.stride(1));
  DSA_CHECK(kv.size(0) == slots.size(0), "kv_insert ({}): kv has {} rows but slots has {} entries", name, kv.size(0),
            slots.size(0));
  DSA_CHECK(kv.device() == cache.device(), "kv_insert ({}): kv on {} but cache on {}", name, kv.device().str(),
            cache.device().str());
  DSA_CHECK(format != KvFormat::Model1 || rounding == ScaleRounding::Pow2Ceil,
            "kv_insert (model1): rounding must be Pow2Ceil (MODEL1 stores UE8M0 scales)");
}

void KvGatherParams::validate() const {
  check_cache_and_slots("kv_gather", format, page_size, cache, slots);
  const auto name = kv_format_name(format);
  const int dim = kv_row_dim(format);
  DSA_CHECK(out.defined(), "kv_gather ({}): out tensor is missing", name);
  DSA_CHECK(out.dtype() == DType::F32 || out.dtype() == DType::BF16, "kv_gather ({}): out must be f32 or bf16, got {}",
            name, dtype_name(out.dtype()));
  DSA_CHECK(out.dim() == 2 && out.size(1) == dim, "kv_gather ({}): out must be [M][{}], got {}", name, dim, out.str());
  DSA_CHECK(out.size(0) <= 1 || out.stride(1) == 1,
            "kv_gather ({}): out rows must be contiguous (stride(1) == 1), got {}", name, out.stride(1));
  DSA_CHECK(out.size(0) == slots.size(0), "kv_gather ({}): out has {} rows but slots has {} entries", name,
            out.size(0), slots.size(0));
  DSA_CHECK(out.device() == cache.device(), "kv_gather ({}): out on {} but cache on {}", name, out.device().str(),
            cache.device().str());
}

void kv_insert_cpu(const KvInsertParams& p) {
  p.validate();
  DSA_CHECK(!p.cache.device().is_cuda(), "kv_insert_cpu: tensors must be on the CPU, cache is on {}",
            p.cache.device().str());
  const int64_t num_slots = p.num_pages() * p.page_size;
  check_slot_values("kv_insert", p.format, p.slots, num_slots);
  const int64_t* slots = p.slots.data<int64_t>();
  const bool pow2 = p.rounding == ScaleRounding::Pow2Ceil;
  auto* cache = p.cache.data<uint8_t>();
  for (int64_t r = 0; r < p.kv.size(0); ++r) {
    if (slots[r] < 0) continue;
    const auto* src = p.kv.data<uint16_t>() + r * p.kv.stride(0);
    switch (p.format) {
      case KvFormat::DsMla: ds_mla_insert_row(src, cache, slots[r], pow2); break;
      case KvFormat::Model1: model1_insert_row(src, cache, slots[r], p.page_size); break;
      case KvFormat::Indexer: indexer_insert_row(src, cache, slots[r], p.page_size, pow2); break;
    }
  }
}

void kv_gather_cpu(const KvGatherParams& p) {
  p.validate();
  DSA_CHECK(!p.cache.device().is_cuda(), "kv_gather_cpu: tensors must be on the CPU, cache is on {}",
            p.cache.device().str());
  const int64_t num_slots = p.num_pages() * p.page_size;
  check_slot_values("kv_gather", p.format, p.slots, num_slots);
  const int64_t* slots = p.slots.data<int64_t>();
  const int dim = kv_row_dim(p.format);
  const auto* cache = p.cache.data<uint8_t>();
  float v[kv::ds_mla::kDim];  // the largest row
  for (int64_t r = 0; r < p.out.size(0); ++r) {
    if (slots[r] < 0) {
      for (int i = 0; i < dim; ++i) v[i] = 0.f;
    } else {
      switch (p.format) {
        case KvFormat::DsMla: ds_mla_row(cache, slots[r], v); break;
        case KvFormat::Model1: model1_row(cache, slots[r], p.page_size, v); break;
        case KvFormat::Indexer: indexer_row(cache, slots[r], p.page_size, v); break;
      }
    }
    if (p.out.dtype() == DType::F32) {
      float* o = p.out.data<float>() + r * p.out.stride(0);
      for (int i = 0; i < dim; ++i) o[i] = v[i];
    } else {
      uint16_t* o = p.out.data<uint16_t>() + r * p.out.stride(0);
      for (int i = 0; i < dim; ++i) o[i] = f32_to_bf16_bits(v[i]);
    }
  }
}

void kv_insert(const KvInsertParams& p) {
  if (!p.cache.device().is_cuda()) return kv_insert_cpu(p);
  p.validate();
#ifdef DSA_WITH_CUDA
  if (p.kv.size(0) == 0) return;
  cuda::KvInsertArgs a;
  a.cache = p.cache.data<uint8_t>();
  a.num_slots = p.num_pages() * p.page_size;
  a.page_size = p.page_size;
  a.kv = p.kv.data<uint16_t>();
  a.kv_row_stride = p.kv.stride(0);
  a.slots = p.slots.data<int64_t>();
  a.rows = p.kv.size(0);
  a.pow2 = p.rounding == ScaleRounding::Pow2Ceil;
  a.stream = p.stream;
  a.device = p.cache.device().index;
  switch (p.format) {
    case KvFormat::DsMla: return cuda::ds_mla_insert(a);
    case KvFormat::Model1: return cuda::model1_insert(a);
    case KvFormat::Indexer: return cuda::indexer_insert(a);
  }
#else
  fail("kv_insert ({}): tensors are on {} but this dsa build has no CUDA", kv_format_name(p.format),
       p.cache.device().str());
#endif
}

void kv_gather(const KvGatherParams& p) {
  if (!p.cache.device().is_cuda()) return kv_gather_cpu(p);
  p.validate();
#ifdef DSA_WITH_CUDA
  if (p.out.size(0) == 0) return;
  cuda::KvGatherArgs a;
  a.cache = p.cache.data<uint8_t>();
  a.num_slots = p.num_pages() * p.page_size;
  a.page_size = p.page_size;
  a.slots = p.slots.data<int64_t>();
  a.rows = p.out.size(0);
  a.out = p.out.raw();
  a.out_row_stride = p.out.stride(0);
  a.out_bf16 = p.out.dtype() == DType::BF16;
  a.stream = p.stream;
  a.device = p.cache.device().index;
  switch (p.format) {
    case KvFormat::DsMla: return cuda::ds_mla_gather(a);
    case KvFormat::Model1: return cuda::model1_gather(a);
    case KvFormat::Indexer: return cuda::indexer_gather(a);
  }
#else
  fail("kv_gather ({}): tensors are on {} but this dsa build has no CUDA", kv_format_name(p.format),
       p.cache.device().str());
#endif
}

}  // namespace dsa::formats
