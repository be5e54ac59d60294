// fp8_ds_mla KV cache (656 B/token, kv_layout.h ds_mla): quantize + insert, gather + dequantize.
// Byte-exact with the CPU reference in kv_cache_ops.cpp (same scalar rules from quant_math.h).
#include "dsa/core/pdl.cuh"
#include "dsa/formats/cuda/common.cuh"
#include "dsa/core/cuda_launch.h"
#include "dsa/formats/cuda/launchers.h"
#include "dsa/formats/kv_layout.h"
#include "dsa/formats/quant_math.h"

namespace dsa::formats::cuda {
namespace {
namespace L = kv::ds_mla;

constexpr int kInsertThreads = (L::kGroups + 1) * 32;  // 4 quantizing warps + 1 rope warp
constexpr int kGatherThreads = 128;

// Insert: one CTA per input row (grid-stride over rows), 160 threads. Warp g < 4 quantizes latent
// group g (128 values, 4 per lane: amax by warp shuffles, then each lane writes its 4 e4m3 bytes as
// one 32-bit store; lane 0 writes the fp32 scale). Warp 4 copies the 64 bf16 rope values (2 per
// lane). A slot of -1 or outside [0, num_slots) skips the row: nothing outside the cache is written.
// Alignment: token offsets are multiples of 656 = 16*41, so all stores are naturally aligned.
__global__ void __launch_bounds__(kInsertThreads) ds_mla_insert_kernel(KvInsertArgs a) {
  pdl::entry();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    const int64_t slot = a.slots[row];
    if (slot < 0 || slot >= a.num_slots) continue;  // uniform per CTA
    uint8_t* t = a.cache + L::token_offset(slot);
    const uint16_t* src = a.kv + row * a.kv_row_stride;
    if (warp < L::kGroups) {
      const uint16_t* g = src + warp * L::kGroup + lane * 4;
      float v[4], amax = 0.f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        v[j] = bf16_bits_to_f32(g[j]);
        amax = amax_update(amax, v[j]);
      }
      const float scale = e4m3_scale(warp_max(amax), a.pow2);
      uint32_t packed = 0;
#pragma unroll
      for (int j = 0; j < 4; ++j) packed |= static_cast<uint32_t>(quantize_e4m3(v[j], scale)) << (8 * j);
      reinterpret_cast<uint32_t*>(t + warp * L::kGroup)[lane] = packed;
      if (lane == 0) reinterpret_cast<float*>(t + L::kScaleOffset)[warp] = scale;
    } else {
      const uint16_t* r = src + L::kNope + lane * 2;
      reinterpret_cast<uint32_t*>(t + L::kRopeOffset)[lane] = r[0] | (static_cast<uint32_t>(r[1]) << 16);
    }
  }
}

// Gather: one CTA per output row (grid-stride), 128 threads, thread t handles columns t, t+128, ...
// of the 576: e4m3 * fp32 group scale for the latent, the stored bf16 for the rope. Invalid or -1
// slots give a zero row. Output rows may be strided (out_row_stride elements apart).
__global__ void __launch_bounds__(kGatherThreads) ds_mla_gather_kernel(KvGatherArgs a) {
  pdl::entry();
  for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    const int64_t slot = a.slots[row];
    const bool valid = slot >= 0 && slot < a.num_slots;
    const uint8_t* t = a.cache + (valid ? L::token_offset(slot) : 0);
    const int64_t o = row * a.out_row_stride;
    for (int d = threadIdx.x; d < L::kDim; d += kGatherThreads) {
      float v = 0.f;
      if (valid) {
        if (d < L::kNope)
          v = dequantize_e4m3(t[d], reinterpret_cast<const float*>(t + L::kScaleOffset)[d / L::kGroup]);
        else
          v = bf16_bits_to_f32(reinterpret_cast<const uint16_t*>(t + L::kRopeOffset)[d - L::kNope]);
      }
      store_value(a.out, o + d, v, a.out_bf16);
    }
  }
}

}  // namespace

void ds_mla_insert(const KvInsertArgs& a) {
  cuda_launch::set_device(a.device);
  pdl::launch(ds_mla_insert_kernel, grid_for(a.rows, 1), kInsertThreads, 0, as_stream(a.stream), a);
  cuda_launch::check_launch("ds_mla_insert_kernel");
}

void ds_mla_gather(const KvGatherArgs& a) {
  cuda_launch::set_device(a.device);
  pdl::launch(ds_mla_gather_kernel, grid_for(a.rows, 1), kGatherThreads, 0, as_stream(a.stream), a);
  cuda_launch::check_launch("ds_mla_gather_kernel");
}

}  // namespace dsa::formats::cuda
