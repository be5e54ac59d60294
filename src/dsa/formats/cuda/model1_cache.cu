// DeepSeek-V4 MODEL1 KV cache (kv_layout.h model1: per page [P x 576 B token data][P x 8 B
// scales], padded to a multiple of 576 B): quantize + insert, gather + dequantize. Byte-exact with
// the CPU reference in kv_cache_ops.cpp (same scalar rules from quant_math.h).
#include "dsa/core/pdl.cuh"
#include "dsa/formats/cuda/common.cuh"
#include "dsa/core/cuda_launch.h"
#include "dsa/formats/cuda/launchers.h"
#include "dsa/formats/kv_layout.h"
#include "dsa/formats/quant_math.h"

namespace dsa::formats::cuda {
namespace {
namespace L = kv::model1;

constexpr int kInsertThreads = (L::kGroups + 1) * 32;  // 7 quantizing warps + 1 rope/pad warp
constexpr int kGatherThreads = 128;

// Insert: one CTA per input row (grid-stride over rows), 256 threads. Warp g < 7 quantizes NoPE
// group g (64 values, 2 per lane, amax by warp shuffles, scale = UE8M0 ceil(amax/448)); each lane
// writes its 2 e4m3 bytes as one 16-bit store, lane 0 the scale byte. Warp 7 copies the 64 bf16
// rope values (2 per lane), writes the footer's pad byte (0), and when the token is the first of its
// page also zeroes the page's tail padding. A slot of -1 or outside [0, num_slots) skips the row.
// Alignment: token data sits at multiples of 576 B from a page start and pages are multiples of
// 576 B, so the 16- and 32-bit stores are aligned.
__global__ void __launch_bounds__(kInsertThreads) model1_insert_kernel(KvInsertArgs a) {
  pdl::entry();
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int P = a.page_size;
  for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    const int64_t slot = a.slots[row];
    if (slot < 0 || slot >= a.num_slots) continue;  // uniform per CTA
    uint8_t* t = a.cache + L::data_offset(slot, P);
    uint8_t* sc = a.cache + L::scale_offset(slot, P);
    const uint16_t* src = a.kv + row * a.kv_row_stride;
    if (warp < L::kGroups) {
      const uint16_t* g = src + warp * L::kGroup + lane * 2;
      const float v0 = bf16_bits_to_f32(g[0]), v1 = bf16_bits_to_f32(g[1]);
      const float amax = warp_max(amax_update(amax_update(0.f, v0), v1));
      const uint8_t e = e4m3_scale_ue8m0(amax);
      const float scale = ue8m0_to_f32(e);
      const uint16_t packed = static_cast<uint16_t>(quantize_e4m3(v0, scale) | (quantize_e4m3(v1, scale) << 8));
      reinterpret_cast<uint16_t*>(t + warp * L::kGroup)[lane] = packed;
      if (lane == 0) sc[warp] = e;
    } else {
      const uint16_t* r = src + L::kNope + lane * 2;
      reinterpret_cast<uint32_t*>(t + L::kRopeOffset)[lane] = r[0] | (static_cast<uint32_t>(r[1]) << 16);
      if (lane == 0) sc[L::kGroups] = 0;
      if (slot % P == 0) {
        uint8_t* page = a.cache + static_cast<size_t>(slot / P) * L::page_bytes(P);
        const size_t used = static_cast<size_t>(P) * L::kLogicalBytes, total = L::page_bytes(P);
        for (size_t i = used + lane; i < total; i += 32) page[i] = 0;
      }
    }
  }
}

// Gather: one CTA per output row (grid-stride), 128 threads, thread t handles columns t, t+128, ...
// of the 512: e4m3 * 2^(scale byte - 127) for the 448 NoPE values, the stored bf16 for the rope.
// Invalid or -1 slots give a zero row.
__global__ void __launch_bounds__(kGatherThreads) model1_gather_kernel(KvGatherArgs a) {
  pdl::entry();
  const int P = a.page_size;
  for (int64_t row = blockIdx.x; row < a.rows; row += gridDim.x) {
    const int64_t slot = a.slots[row];
    const bool valid = slot >= 0 && slot < a.num_slots;
    const uint8_t* t = a.cache + (valid ? L::data_offset(slot, P) : 0);
    const uint8_t* sc = a.cache + (valid ? L::scale_offset(slot, P) : 0);
    const int64_t o = row * a.out_row_stride;
    for (int d = threadIdx.x; d < L::kDim; d += kGatherThreads) {
      float v = 0.f;
      if (valid) {
        if (d < L::kNope)
          v = dequantize_e4m3(t[d], ue8m0_to_f32(sc[d / L::kGroup]));
        else
          v = bf16_bits_to_f32(reinterpret_cast<const uint16_t*>(t + L::kRopeOffset)[d - L::kNope]);
      }
      store_value(a.out, o + d, v, a.out_bf16);
    }
  }
}

}  // namespace

void model1_insert(const KvInsertArgs& a) {
  cuda_launch::set_device(a.device);
  pdl::launch(model1_insert_kernel, grid_for(a.rows, 1), kInsertThreads, 0, as_stream(a.stream), a);
  cuda_launch::check_launch("model1_insert_kernel");
}

void model1_gather(const KvGatherArgs& a) {
  cuda_launch::set_device(a.device);
  pdl::launch(model1_gather_kernel, grid_for(a.rows, 1), kGatherThreads, 0, as_stream(a.stream), a);
  cuda_launch::check_launch("model1_gather_kernel");
}

}  // namespace dsa::formats::cuda
