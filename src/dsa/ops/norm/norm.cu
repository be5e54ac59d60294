// RMSNorm / LayerNorm over rows (norm.h). One CTA per row, threads striding over the columns:
// pass 1 (LayerNorm only) sums x for the mean, pass 2 sums (x - mean)^2, pass 3 writes
// (x - mean) * rsqrt(var + eps) * w + b. The row is re-read from L1/L2 each pass (rows are at
// most a few KB). Each thread writes only elements it read itself after every reduction has
// finished, so out == x (in place) is safe. Launch: grid = rows, block = 64..512 threads chosen
// from cols (a CTA per row keeps rows independent and the reduction deterministic).
#include "dsa/ops/norm/cuda_elem.cuh"
#include "dsa/core/cuda_launch.h"
#include "dsa/ops/norm/norm_cuda.h"
#include "dsa/core/cuda_stream.h"

namespace dsa::ops::cuda {
namespace {

__global__ void row_norm_kernel(RowNormArgs a) {
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  const char* xr = static_cast<const char*>(a.x) + r * a.x_row_stride * (a.x_dtype == DType::BF16 ? 2 : 4);
  char* orow = static_cast<char*>(a.out) + r * a.out_row_stride * (a.out_dtype == DType::BF16 ? 2 : 4);
  const float n = static_cast<float>(a.cols);
  float mean = 0.f;
  if (a.layer_norm) {
    float s = 0.f;
    for (int64_t i = threadIdx.x; i < a.cols; i += blockDim.x) s += ld(xr, a.x_dtype, i);
    mean = block_sum(s, scratch) / n;
  }
  float ss = 0.f;
  for (int64_t i = threadIdx.x; i < a.cols; i += blockDim.x) {
    const float v = ld(xr, a.x_dtype, i) - mean;
    ss += v * v;
  }
  const float inv = 1.0f / sqrtf(block_sum(ss, scratch) / n + a.eps);
  for (int64_t i = threadIdx.x; i < a.cols; i += blockDim.x) {
    float v = (ld(xr, a.x_dtype, i) - mean) * inv;
    if (a.weight) v *= ld(a.weight, a.weight_dtype, i);
    if (a.bias) v += ld(a.bias, a.bias_dtype, i);
    st(orow, a.out_dtype, i, v);
  }
}

}  // namespace

void row_norm(const RowNormArgs& a) {
  if (a.rows == 0) return;
  if (a.rows > 0x7fffffffLL) cuda_launch::launch_error("row_norm: too many rows for one grid");
  const int threads = a.cols >= 4096 ? 512 : a.cols >= 1024 ? 256 : a.cols >= 256 ? 128 : 64;
  row_norm_kernel<<<static_cast<unsigned>(a.rows), threads, 0, DSA_CURRENT_STREAM>>>(a);
  cuda_launch::check_launch("row_norm_kernel");
}

}  // namespace dsa::ops::cuda
