// Packing of UE8M0 exponents, four per int32 (ue8m0_pack.h): one generic kernel serves the K-major,
// the MN-major TMA-aligned and the K-grouped layouts, which differ only in strides and in where each
// packed row's scale rows start (see Ue8m0PackArgs in launchers.h).
#include "dsa/core/pdl.cuh"
#include "dsa/formats/cuda/common.cuh"
#include "dsa/core/cuda_launch.h"
#include "dsa/formats/cuda/launchers.h"

namespace dsa::formats::cuda {
namespace {

constexpr int kThreads = 256;

// One thread per output int32 (g, p, m), m fastest (coalesced stores for the MN-major layouts),
// grid-stride over groups * packed_k * out_m_extent. Reads up to 4 scales of column m from the
// packed row's scale rows (first(p) + j, j < count(p)), converts fp32 scales with the same
// round-up rule as the CPU (f32_to_ue8m0_ceil), and places byte j at bits 8j. Padding columns
// (m >= mn) get 0. `rows` is the device copy of the k-grouped row table or null.
__global__ void __launch_bounds__(kThreads) ue8m0_pack_kernel(Ue8m0PackArgs a, const int32_t* rows) {
  pdl::entry();
  const int64_t per_group = a.packed_k * a.out_m_extent;
  const int64_t n = a.groups * per_group;
  for (int64_t i = int64_t(blockIdx.x) * kThreads + threadIdx.x; i < n; i += int64_t(gridDim.x) * kThreads) {
    const int64_t g = i / per_group, p = (i % per_group) / a.out_m_extent, m = i % a.out_m_extent;
    uint32_t word = 0;
    if (m < a.mn) {
      int64_t first = 4 * p, count = a.sf_k - 4 * p;
      if (rows) {
        first = rows[2 * p];
        count = rows[2 * p + 1];
      }
      if (count > 4) count = 4;
      for (int64_t j = 0; j < count; ++j) {
        const int64_t idx = g * a.in_g_stride + m * a.in_m_stride + (first + j) * a.in_k_stride;
        const uint8_t b = a.sf_f32 ? f32_to_ue8m0_ceil(static_cast<const float*>(a.sf)[idx])
                                   : static_cast<const uint8_t*>(a.sf)[idx];
        word |= static_cast<uint32_t>(b) << (8 * j);
      }
    }
    a.out[g * a.out_g_stride + p * a.out_p_stride + m * a.out_m_stride] = static_cast<int32_t>(word);
  }
}

}  // namespace

void ue8m0_pack(const Ue8m0PackArgs& a) {
  cuda_launch::set_device(a.device);
  cudaStream_t s = as_stream(a.stream);
  int32_t* rows = nullptr;
  const size_t table_bytes = static_cast<size_t>(a.packed_k) * 2 * sizeof(int32_t);
  if (a.rows_host && table_bytes) {
    // Stream-ordered temporary for the row table: allocated, filled, used and freed on `s`.
    cuda_launch::check_status(cudaMallocAsync(reinterpret_cast<void**>(&rows), table_bytes, s),
                              "cudaMallocAsync (ue8m0 row table)");
    cuda_launch::check_status(cudaMemcpyAsync(rows, a.rows_host, table_bytes, cudaMemcpyHostToDevice, s),
                              "cudaMemcpyAsync (ue8m0 row table)");
  }
  pdl::launch(ue8m0_pack_kernel, grid_for(a.groups * a.packed_k * a.out_m_extent, kThreads), kThreads, 0, s, a, rows);
  cuda_launch::check_launch("ue8m0_pack_kernel");
  if (rows) cudaFreeAsync(rows, s);
}

}  // namespace dsa::formats::cuda
