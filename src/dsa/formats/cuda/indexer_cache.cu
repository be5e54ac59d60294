// Indexer key cache (kv_layout.h indexer: per page [P x 128 B e4m3 keys][P x 4 B fp32 scales]):
// quantize + insert, gather + dequantize. Byte-exact with the CPU reference in kv_cache_ops.cpp.
#include "dsa/core/pdl.cuh"
#include "dsa/formats/cuda/common.cuh"
#include "dsa/core/cuda_launch.h"
#include "dsa/formats/cuda/launchers.h"
#include "dsa/formats/kv_layout.h"
#include "dsa/formats/quant_math.h"

namespace dsa::formats::cuda {
namespace {
namespace L = kv::indexer;

constexpr int kRowsPerBlock = 4;  // one warp per row
constexpr int kThreads = kRowsPerBlock * 32;

// Insert: one warp per input row (4 rows per CTA, grid-stride). Each lane loads 4 of the 128
// values; the warp's amax gives the fp32 scale (power of two unless a.pow2 is false); each lane
// writes its 4 e4m3 bytes as one 32-bit store (key offsets are multiples of 128 B), lane 0 the
// scale. A slot of -1 or outside [0, num_slots) skips the row.
__global__ void __launch_bounds__(kThreads) indexer_insert_kernel(KvInsertArgs a) {
  pdl::entry();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + warp; row < a.rows;
       row += int64_t(gridDim.x) * kRowsPerBlock) {
    const int64_t slot = a.slots[row];
    if (slot < 0 || slot >= a.num_slots) continue;  // uniform per warp
    const uint16_t* src = a.kv + row * a.kv_row_stride + lane * 4;
    float v[4], amax = 0.f;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      v[j] = bf16_bits_to_f32(src[j]);
      amax = amax_update(amax, v[j]);
    }
    const float scale = e4m3_scale(warp_max(amax), a.pow2);
    uint32_t packed = 0;
#pragma unroll
    for (int j = 0; j < 4; ++j) packed |= static_cast<uint32_t>(quantize_e4m3(v[j], scale)) << (8 * j);
    reinterpret_cast<uint32_t*>(a.cache + L::key_offset(slot, a.page_size))[lane] = packed;
    if (lane == 0) *reinterpret_cast<float*>(a.cache + L::scale_offset(slot, a.page_size)) = scale;
  }
}

// Gather: one warp per output row (4 rows per CTA, grid-stride), 4 values per lane: e4m3 * scale.
// Invalid or -1 slots give a zero row.
__global__ void __launch_bounds__(kThreads) indexer_gather_kernel(KvGatherArgs a) {
  pdl::entry();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int64_t row = int64_t(blockIdx.x) * kRowsPerBlock + warp; row < a.rows;
       row += int64_t(gridDim.x) * kRowsPerBlock) {
    const int64_t slot = a.slots[row];
    const bool valid = slot >= 0 && slot < a.num_slots;
    uint32_t codes = 0;
    float scale = 0.f;
    if (valid) {
      codes = reinterpret_cast<const uint32_t*>(a.cache + L::key_offset(slot, a.page_size))[lane];
      scale = *reinterpret_cast<const float*>(a.cache + L::scale_offset(slot, a.page_size));
    }
    const int64_t o = row * a.out_row_stride + lane * 4;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float v = valid ? dequantize_e4m3(static_cast<uint8_t>(codes >> (8 * j)), scale) : 0.f;
      store_value(a.out, o + j, v, a.out_bf16);
    }
  }
}

}  // namespace

void indexer_insert(const KvInsertArgs& a) {
  cuda_launch::set_device(a.device);
  pdl::launch(indexer_insert_kernel, grid_for(a.rows, kRowsPerBlock), kThreads, 0, as_stream(a.stream), a);
  cuda_launch::check_launch("indexer_insert_kernel");
}

void indexer_gather(const KvGatherArgs& a) {
  cuda_launch::set_device(a.device);
  pdl::launch(indexer_gather_kernel, grid_for(a.rows, kRowsPerBlock), kThreads, 0, as_stream(a.stream), a);
  cuda_launch::check_launch("indexer_gather_kernel");
}

}  // namespace dsa::formats::cuda
