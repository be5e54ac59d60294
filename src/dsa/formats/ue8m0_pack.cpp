// Validation, CPU reference and CUDA dispatch of the packed UE8M0 layouts (ue8m0_pack.h).
#include "dsa/formats/ue8m0_pack.h"

#include <algorithm>

#include "dsa/core/dtype_conv.h"
#ifdef DSA_WITH_CUDA
#include "dsa/formats/cuda/launchers.h"
#endif

namespace dsa::formats {

namespace {

void check_sf(std::string_view op, const Tensor& sf) {
  DSA_CHECK(sf.defined(), "{}: sf tensor is missing", op);
  DSA_CHECK(sf.dtype() == DType::F32 || sf.dtype() == DType::E8M0 || sf.dtype() == DType::U8,
            "{}: sf must be f32 scales or ue8m0 (or raw u8) bytes, got {}", op, dtype_name(sf.dtype()));
  DSA_CHECK(sf.is_contiguous(), "{}: sf must be contiguous, got {}", op, sf.str());
}

void check_out(std::string_view op, const Tensor& out, const Shape& want, const Tensor& sf) {
  DSA_CHECK(out.defined(), "{}: out tensor is missing", op);
  DSA_CHECK(out.dtype() == DType::I32, "{}: out must be i32, got {}", op, dtype_name(out.dtype()));
  DSA_CHECK(out.shape() == want, "{}: out for sf {} must be {}, got {}", op, shape_str(sf.shape()), shape_str(want),
            shape_str(out.shape()));
  DSA_CHECK(out.is_contiguous(), "{}: out must be contiguous, got {}", op, out.str());
  DSA_CHECK(out.device() == sf.device(), "{}: sf on {} but out on {}", op, sf.device().str(), out.device().str());
}

// The UE8M0 byte of sf element i.
uint8_t sf_byte(const Tensor& sf, int64_t i) {
  if (sf.dtype() == DType::F32) return f32_to_ue8m0_ceil(sf.data<float>()[i]);
  return sf.data<uint8_t>()[i];
}

void put(const Tensor& out, int64_t i, uint32_t word) { out.data<int32_t>()[i] = static_cast<int32_t>(word); }

#ifdef DSA_WITH_CUDA
cuda::Ue8m0PackArgs base_args(const Tensor& sf, const Tensor& out, void* stream) {
  cuda::Ue8m0PackArgs a;
  a.sf = sf.raw();
  a.sf_f32 = sf.dtype() == DType::F32;
  a.out = out.data<int32_t>();
  a.stream = stream;
  a.device = sf.device().index;
  return a;
}
#endif

#ifndef DSA_WITH_CUDA
[[noreturn]] void no_cuda(std::string_view op, const Tensor& t) {
  fail("{}: tensors are on {} but this dsa build has no CUDA", op, t.device().str());
}
#endif

}  // namespace

// ---- 1. K-major packing --------------------------------------------------------------------
void Ue8m0PackParams::validate() const {
  constexpr std::string_view op = "pack_ue8m0";
  check_sf(op, sf);
  DSA_CHECK(sf.dim() >= 1 && sf.dim() <= 3, "{}: sf must have 1 to 3 dimensions, got {}", op, sf.str());
  Shape want = sf.shape();
  want.back() = packed_sf_k(want.back());
  check_out(op, out, want, sf);
}

void pack_ue8m0_cpu(const Ue8m0PackParams& p) {
  p.validate();
  DSA_CHECK(!p.sf.device().is_cuda(), "pack_ue8m0_cpu: tensors must be on the CPU, got {}", p.sf.device().str());
  const int64_t sf_k = p.sf.shape().back(), pk = packed_sf_k(sf_k);
  if (sf_k == 0) return;
  const int64_t rows = p.sf.numel() / sf_k;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < pk; ++i) {
      uint32_t word = 0;
      for (int64_t j = 0; j < 4 && 4 * i + j < sf_k; ++j) word |= uint32_t{sf_byte(p.sf, r * sf_k + 4 * i + j)} << (8 * j);
      put(p.out, r * pk + i, word);
    }
}

void pack_ue8m0(const Ue8m0PackParams& p) {
  if (!p.sf.device().is_cuda()) return pack_ue8m0_cpu(p);
  p.validate();
#ifdef DSA_WITH_CUDA
  if (p.out.numel() == 0) return;
  const int64_t sf_k = p.sf.shape().back();
  cuda::Ue8m0PackArgs a = base_args(p.sf, p.out, p.stream);
  // Rows play the role of mn: out[0][p][r] at r * packed + p.
  a.groups = 1;
  a.mn = a.out_m_extent = p.out.numel() / packed_sf_k(sf_k);
  a.sf_k = sf_k;
  a.packed_k = packed_sf_k(sf_k);
  a.in_m_stride = sf_k;
  a.in_k_stride = 1;
  a.out_p_stride = 1;
  a.out_m_stride = a.packed_k;
  cuda::ue8m0_pack(a);
#else
  no_cuda("pack_ue8m0", p.sf);
#endif
}

// ---- 2. MN-major TMA-aligned ------------------------------------------------------------------
Shape mn_major_packed_shape(const Shape& s) {
  DSA_CHECK(s.size() == 2 || s.size() == 3, "mn_major_packed_shape: sf must be [mn][sf_k] or [G][mn][sf_k], got {}",
            shape_str(s));
  const int64_t mn = s[s.size() - 2], sf_k = s.back();
  if (s.size() == 2) return {packed_sf_k(sf_k), tma_aligned_mn(mn)};
  return {s[0], packed_sf_k(sf_k), tma_aligned_mn(mn)};
}

void Ue8m0MnMajorParams::validate() const {
  constexpr std::string_view op = "pack_ue8m0_mn_major";
  check_sf(op, sf);
  DSA_CHECK(sf.dim() == 2 || sf.dim() == 3, "{}: sf must be [mn][sf_k] or [G][mn][sf_k], got {}", op, sf.str());
  check_out(op, out, mn_major_packed_shape(sf.shape()), sf);
}

void pack_ue8m0_mn_major_cpu(const Ue8m0MnMajorParams& p) {
  p.validate();
  DSA_CHECK(!p.sf.device().is_cuda(), "pack_ue8m0_mn_major_cpu: tensors must be on the CPU, got {}",
            p.sf.device().str());
  const bool batched = p.sf.dim() == 3;
  const int64_t G = batched ? p.sf.size(0) : 1, mn = p.sf.size(-2), sf_k = p.sf.size(-1);
  const int64_t pk = packed_sf_k(sf_k), amn = tma_aligned_mn(mn);
  for (int64_t g = 0; g < G; ++g)
    for (int64_t i = 0; i < pk; ++i)
      for (int64_t m = 0; m < amn; ++m) {
        uint32_t word = 0;
        if (m < mn)
          for (int64_t j = 0; j < 4 && 4 * i + j < sf_k; ++j)
            word |= uint32_t{sf_byte(p.sf, (g * mn + m) * sf_k + 4 * i + j)} << (8 * j);
        put(p.out, (g * pk + i) * amn + m, word);
      }
}

void pack_ue8m0_mn_major(const Ue8m0MnMajorParams& p) {
  if (!p.sf.device().is_cuda()) return pack_ue8m0_mn_major_cpu(p);
  p.validate();
#ifdef DSA_WITH_CUDA
  if (p.out.numel() == 0) return;
  const bool batched = p.sf.dim() == 3;
  cuda::Ue8m0PackArgs a = base_args(p.sf, p.out, p.stream);
  a.groups = batched ? p.sf.size(0) : 1;
  a.mn = p.sf.size(-2);
  a.sf_k = p.sf.size(-1);
  a.packed_k = packed_sf_k(a.sf_k);
  a.out_m_extent = tma_aligned_mn(a.mn);
  a.in_g_stride = a.mn * a.sf_k;
  a.in_m_stride = a.sf_k;
  a.in_k_stride = 1;
  a.out_g_stride = a.packed_k * a.out_m_extent;
  a.out_p_stride = a.out_m_extent;
  a.out_m_stride = 1;
  cuda::ue8m0_pack(a);
#else
  no_cuda("pack_ue8m0_mn_major", p.sf);
#endif
}

// ---- 3. K-grouped ---------------------------------------------------------------------------
namespace {
void check_ks(std::string_view op, const std::vector<int64_t>& ks, int gran_k) {
  DSA_CHECK(gran_k > 0, "{}: gran_k must be positive, got {}", op, gran_k);
  for (size_t g = 0; g < ks.size(); ++g)
    DSA_CHECK(ks[g] >= 0, "{}: ks[{}] = {} is negative", op, g, ks[g]);
}
int64_t group_sf_rows(int64_t k, int gran_k) { return (k + gran_k - 1) / gran_k; }

#ifdef DSA_WITH_CUDA
// Per packed row: {first sf row, number of sf rows (1..4)}; consumed by the CUDA kernel.
std::vector<int32_t> k_grouped_row_table(const std::vector<int64_t>& ks, int gran_k) {
  std::vector<int32_t> t;
  int64_t first = 0;
  for (int64_t k : ks) {
    const int64_t n = group_sf_rows(k, gran_k);
    for (int64_t i = 0; i < n; i += 4) {
      t.push_back(static_cast<int32_t>(first + i));
      t.push_back(static_cast<int32_t>(std::min<int64_t>(4, n - i)));
    }
    first += n;
  }
  return t;
}
#endif
}  // namespace

int64_t k_grouped_sf_rows(const std::vector<int64_t>& ks, int gran_k) {
  check_ks("k_grouped_sf_rows", ks, gran_k);
  int64_t n = 0;
  for (int64_t k : ks) n += group_sf_rows(k, gran_k);
  return n;
}

Shape k_grouped_packed_shape(const std::vector<int64_t>& ks, int gran_k, int64_t mn) {
  check_ks("k_grouped_packed_shape", ks, gran_k);
  int64_t rows = 0;
  for (int64_t k : ks) rows += packed_sf_k(group_sf_rows(k, gran_k));
  return {rows, tma_aligned_mn(mn)};
}

void Ue8m0KGroupedParams::validate() const {
  constexpr std::string_view op = "pack_ue8m0_k_grouped";
  check_sf(op, sf);
  check_ks(op, ks, gran_k);
  DSA_CHECK(sf.dim() == 2, "{}: sf must be [sf_rows][mn], got {}", op, sf.str());
  const int64_t rows = k_grouped_sf_rows(ks, gran_k);
  DSA_CHECK(sf.size(0) == rows, "{}: sf has {} rows but ks (gran_k {}) needs sum ceil(ks/gran_k) = {}", op,
            sf.size(0), gran_k, rows);
  DSA_CHECK(rows < (int64_t{1} << 31), "{}: {} scale rows exceed the int32 row table", op, rows);
  check_out(op, out, k_grouped_packed_shape(ks, gran_k, sf.size(1)), sf);
}

void pack_ue8m0_k_grouped_cpu(const Ue8m0KGroupedParams& p) {
  p.validate();
  DSA_CHECK(!p.sf.device().is_cuda(), "pack_ue8m0_k_grouped_cpu: tensors must be on the CPU, got {}",
            p.sf.device().str());
  const int64_t mn = p.sf.size(1), amn = tma_aligned_mn(mn);
  int64_t sf_row = 0, out_row = 0;
  for (int64_t k : p.ks) {
    const int64_t n = group_sf_rows(k, p.gran_k);
    for (int64_t i = 0; i < packed_sf_k(n); ++i, ++out_row)
      for (int64_t m = 0; m < amn; ++m) {
        uint32_t word = 0;
        if (m < mn)
          for (int64_t j = 0; j < 4 && 4 * i + j < n; ++j)
            word |= uint32_t{sf_byte(p.sf, (sf_row + 4 * i + j) * mn + m)} << (8 * j);
        put(p.out, out_row * amn + m, word);
      }
    sf_row += n;
  }
}

void pack_ue8m0_k_grouped(const Ue8m0KGroupedParams& p) {
  if (!p.sf.device().is_cuda()) return pack_ue8m0_k_grouped_cpu(p);
  p.validate();
#ifdef DSA_WITH_CUDA
  if (p.out.numel() == 0) return;
  const std::vector<int32_t> table = k_grouped_row_table(p.ks, p.gran_k);
  cuda::Ue8m0PackArgs a = base_args(p.sf, p.out, p.stream);
  a.groups = 1;
  a.mn = p.sf.size(1);
  a.sf_k = p.sf.size(0);
  a.packed_k = p.out.size(0);
  a.out_m_extent = p.out.size(1);
  a.in_m_stride = 1;
  a.in_k_stride = a.mn;
  a.out_p_stride = a.out_m_extent;
  a.out_m_stride = 1;
  a.rows_host = table.data();
  cuda::ue8m0_pack(a);
#else
  no_cuda("pack_ue8m0_k_grouped", p.sf);
#endif
}

}  // namespace dsa::formats
