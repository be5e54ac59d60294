// Plain launch arguments and shared-memory budget of the portable sparse-MLA kernels. Kept free
// of engine headers so that the .cu files stay small and host code can reason about the budget.
#pragma once
#include <cstdint>

namespace dsa::ops::sparse_mla_cuda {

constexpr int kKeysPerTile = 32;     // keys per pipeline stage
constexpr int kSm120SmemLimit = 101376;  // max shared memory per block on SM120 (99 KB)

// Everything the decode kernel reads. Cache 0 = main, cache 1 = extra (idx[1] == nullptr: none).
struct DecodeArgs {
  const uint16_t* q;  // bf16 [T][H][D]
  const uint8_t* cache[2];
  int page_shift[2];        // log2(page size)
  int64_t page_bytes[2];    // bytes per page (MODEL1); unused for fp8_ds_mla
  int64_t num_slots[2];     // slots >= this are skipped
  const int32_t* idx[2];    // [T][K]
  int idx_k[2];
  const int32_t* len[2];    // optional [T]
  const float* sink;        // optional [H]
  float scale_log2;         // softmax_scale * log2(e)
  int T, H;
  int splits;
  uint16_t* o;      // bf16 [T][H][512]      (splits == 1)
  float* lse;       // f32 [T][H]           (splits == 1)
  float* o_part;    // f32 [T][H][splits][512] (splits > 1)
  float* lse_part;  // f32 [T][H][splits]      (splits > 1), natural log, -inf when empty
};

// Geometry of one cache kind inside the kernel.
template <int kDqk, int kNopeChunks, int kRopeChunks, int kRawStride, int kRopeRaw>
struct LayoutGeom {
  static constexpr int D = kDqk;             // values per key row (= d_qk)
  static constexpr int KROW = kDqk + 8;      // bf16 row stride in smem (+16 B: conflict-free ldmatrix)
  static constexpr int NOPE_CHUNKS = kNopeChunks;  // 16-value fp8 chunks
  static constexpr int ROPE_CHUNKS = kRopeChunks;  // 8-value bf16 chunks
  static constexpr int ITEMS = kNopeChunks + kRopeChunks;
  static constexpr int RAW_STRIDE = kRawStride;    // raw bytes per key in smem
  static constexpr int ROPE_RAW = kRopeRaw;        // byte offset of rope inside a raw row
};
// fp8_ds_mla: raw row = the 656-byte token (512 e4m3 | 4 fp32 scales | 64 bf16 rope).
using DsMlaGeom = LayoutGeom<576, 32, 8, 656, 528>;
// MODEL1: raw row = 576 bytes token data (448 e4m3 | 64 bf16 rope) + 8 scale bytes, padded to 592.
using Model1Geom = LayoutGeom<512, 28, 8, 592, 448>;

constexpr int spart_row() { return kKeysPerTile + 8; }  // fp32 row stride of the score partials

template <class G>
constexpr int smem_bytes(int hpc) {
  return kKeysPerTile * G::KROW * 2                   // bf16 key tile
         + kKeysPerTile * G::RAW_STRIDE               // raw fp8 staging tile
         + (hpc / 16) * 4 * 16 * spart_row() * 4      // QK partial sums per (head group, quarter)
         + 2 * 2 * kKeysPerTile * 4;                  // slot + cache id, double-buffered
}
// The largest dynamic shared memory any launcher of this backend requests (CI check uses it).
constexpr int kMaxDynamicSmem = smem_bytes<DsMlaGeom>(32);
// 1 KB of static shared memory per block is reported by ptxas/cuobjdump on sm_90a/sm_120a.
static_assert(smem_bytes<DsMlaGeom>(32) + 1024 <= kSm120SmemLimit, "sparse-MLA kernel exceeds SM120 shared memory");
static_assert(smem_bytes<Model1Geom>(32) <= kMaxDynamicSmem, "kMaxDynamicSmem must bound every variant");

void launch_decode_ds_mla(const DecodeArgs& a, int heads_per_cta, void* stream);
void launch_decode_model1(const DecodeArgs& a, int heads_per_cta, void* stream);
// cudaFuncGetAttributes on a decode kernel for the current device: 0 (cudaSuccess) when this
// build holds an image for it, else the CUDA error code.
int probe_decode_kernel(void* attributes_out);
void launch_combine(const float* o_part, const float* lse_part, const float* sink, int T, int H, int splits,
                    uint16_t* o, float* lse, void* stream);

}  // namespace dsa::ops::sparse_mla_cuda
