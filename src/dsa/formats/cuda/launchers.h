// Host-side entry points of the dsa/formats CUDA kernels. Plain pointers and sizes only (no
// Tensor, no fmt), so the .cu files stay small. The C++ dispatchers (kv_cache_ops.cpp,
// fp8_block.cpp, mxfp4.cpp, ue8m0_pack.cpp) validate everything and then call these; the
// launchers assume validated arguments, launch asynchronously on `stream` and check the launch.
#pragma once
#include <cstdint>

namespace dsa::formats::cuda {

// ---- KV caches (ds_mla_cache.cu, model1_cache.cu, indexer_cache.cu) -----------------------
struct KvInsertArgs {
  uint8_t* cache = nullptr;
  int64_t num_slots = 0;  // num_pages * page_size; slots outside [0, num_slots) are skipped
  int page_size = 0;
  const uint16_t* kv = nullptr;  // bf16 bits, rows of the format's row dim
  int64_t kv_row_stride = 0;     // in elements
  const int64_t* slots = nullptr;
  int64_t rows = 0;
  bool pow2 = true;  // round fp32 scales up to powers of two
  void* stream = nullptr;
  int device = 0;
};
struct KvGatherArgs {
  const uint8_t* cache = nullptr;
  int64_t num_slots = 0;  // slots outside [0, num_slots) give zero rows
  int page_size = 0;
  const int64_t* slots = nullptr;
  int64_t rows = 0;
  void* out = nullptr;        // f32 or bf16
  int64_t out_row_stride = 0;  // in elements
  bool out_bf16 = false;
  void* stream = nullptr;
  int device = 0;
};
void ds_mla_insert(const KvInsertArgs& a);
void ds_mla_gather(const KvGatherArgs& a);
void model1_insert(const KvInsertArgs& a);
void model1_gather(const KvGatherArgs& a);
void indexer_insert(const KvInsertArgs& a);
void indexer_gather(const KvGatherArgs& a);

// ---- Block-scaled weights (fp8_block.cu, mxfp4.cu) ----------------------------------------
struct Fp8BlockDequantArgs {
  const uint8_t* weight = nullptr;  // e4m3 [rows][cols]
  const void* scale = nullptr;      // [ceil(rows/block_rows)][ceil(cols/block_cols)]
  bool scale_ue8m0 = true;          // else fp32
  int64_t rows = 0, cols = 0;
  int block_rows = 128, block_cols = 128;
  void* out = nullptr;  // [rows][cols] f32 or bf16
  bool out_bf16 = true;
  void* stream = nullptr;
  int device = 0;
};
void fp8_block_dequantize(const Fp8BlockDequantArgs& a);

struct Mxfp4DequantArgs {
  const uint8_t* packed = nullptr;  // [rows][cols/2], low nibble = even element
  const uint8_t* scale = nullptr;   // UE8M0 [rows][cols/32]
  int64_t rows = 0, cols = 0;
  void* out = nullptr;  // [rows][cols] f32 or bf16
  bool out_bf16 = true;
  void* stream = nullptr;
  int device = 0;
};
void mxfp4_dequantize(const Mxfp4DequantArgs& a);

// ---- UE8M0 packing (ue8m0_pack.cu) ---------------------------------------------------------
// One generic packer. Output element (g, p, m), m in [0, out_m_extent):
//   out[g*out_g_stride + p*out_p_stride + m*out_m_stride] =
//     sum_{j < count(p)} ue8m0(sf[g*in_g_stride + m*in_m_stride + (first(p) + j)*in_k_stride]) << 8j
// for m < mn, and 0 for m >= mn (alignment padding). first(p) = 4p and count(p) = min(4, sf_k - 4p)
// unless `rows_host` is given: then rows[2p] = first, rows[2p+1] = count (k-grouped layouts).
struct Ue8m0PackArgs {
  const void* sf = nullptr;
  bool sf_f32 = true;  // fp32 scales (rounded up to powers of two) or UE8M0 bytes
  int64_t groups = 1, mn = 0, sf_k = 0, packed_k = 0, out_m_extent = 0;
  int64_t in_g_stride = 0, in_m_stride = 0, in_k_stride = 0;
  int64_t out_g_stride = 0, out_p_stride = 0, out_m_stride = 0;
  const int32_t* rows_host = nullptr;  // host [packed_k][2] or null; the launcher uploads it (stream-ordered)
  int32_t* out = nullptr;
  void* stream = nullptr;
  int device = 0;
};
void ue8m0_pack(const Ue8m0PackArgs& a);

}  // namespace dsa::formats::cuda
