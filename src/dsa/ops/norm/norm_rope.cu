// Fused RMSNorm + RoPE + bf16 rounding (norm_rope.h): one launch where the V4 attention ran
// rms_norm (f32 out), apply_rope, cast to bf16 and, for padded heads, a zero fill and a copy (q),
// or the same three plus kv_insert (kv into the MODEL1 cache).
//
// norm_rope_kernel<U, MODEL1>: one CTA per output row (token t, head h < heads_padded), the layout
// of norm.cu's row_norm_reg_kernel on purpose: thread i owns the 4-column groups i, i + blockDim,
// ... (U of them), block = ceil(groups / U) rounded up to a warp, U = row_norm_reg_groups_per_thread
// (D = 512: U = 1, 128 threads). Loads first (16-byte f32 / 8-byte bf16 when aligned), the sum of
// squares with the same per-thread fmaf order and the same block_sum, so inv = 1 / sqrtf(ss / D +
// eps) is bit-identical to the unfused norm; y = x * inv [* w] in f32 as there. RoPE pairs
// (offset even) never straddle a 4-group, so each thread rotates its own pairs with rope_math.cuh
// (the helper rope.cu uses): bit-identical to apply_rope on the f32 norm output. One bf16 rounding
// (RNE) per value, as ops::cast. Rows of padding heads (h >= heads) read nothing and store zeros.
//
// MODEL1 (D = 512, one head, 128 threads): after the rounding, thread i holds values [4i, 4i + 4);
// threads 0..111 are the 7 NoPE groups of 64 (16 threads, a half warp each): amax of the bf16
// values over the half warp (xor shuffles 8..1, exact and order-free), UE8M0 scale, 4 e4m3 bytes
// as one 32-bit store, the half warp's first thread the scale byte; threads 112..127 store the 64
// bf16 rope values (two 32-bit stores each), thread 112 the footer pad byte, and the token at page
// position 0 zeroes its page's tail padding: the bytes formats' model1_insert_kernel writes for the
// same bf16 row (quant_math.h on both). A slot of -1 or outside [0, num_slots) skips the cache
// (CTA-uniform); the optional bf16 output row is written whatever the slot.
// Alignment: token data sits at multiples of 576 B from a page start and pages are multiples of
// 576 B, so the 32-bit stores are aligned (as in model1_insert_kernel).
#include "dsa/core/pdl.cuh"
#include "dsa/core/cuda_launch.h"
#include "dsa/core/cuda_stream.h"
#include "dsa/formats/kv_layout.h"
#include "dsa/formats/quant_math.h"
#include "dsa/ops/norm/cuda_vec4.cuh"
#include "dsa/ops/norm/norm_cuda.h"
#include "dsa/ops/norm/norm_rope_cuda.h"
#include "dsa/ops/rope/rope_math.cuh"

namespace dsa::ops::cuda {
namespace {

namespace M1 = kv::model1;

__device__ __forceinline__ int64_t esz(DType t) { return t == DType::BF16 ? 2 : 4; }

template <int U, bool MODEL1>
__global__ void __launch_bounds__(512) norm_rope_kernel(const __grid_constant__ NormRopeArgs a, bool vec_in, bool vec_out) {
  pdl::entry();
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const int64_t t = row / a.heads_padded, h = row % a.heads_padded;
  const int64_t n = a.dim;
  uint16_t* orow = a.out ? a.out + t * a.out_token_stride + h * a.out_head_stride : nullptr;
  if (h >= a.heads) {  // padding head: zeros, no reads (CTA-uniform, before any barrier)
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int64_t i = 4 * (threadIdx.x + static_cast<int64_t>(u) * blockDim.x);
      if (i < n) st4(orow, DType::BF16, i, n, vec_out, F4{});
    }
    return;
  }
  const char* xr = static_cast<const char*>(a.x) + (t * a.x_token_stride + h * a.x_head_stride) * esz(a.x_dtype);
  F4 x[U], w[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t i = 4 * (threadIdx.x + static_cast<int64_t>(u) * blockDim.x);
    const bool in = i < n;
    x[u] = in ? ld4(xr, a.x_dtype, i, n, vec_in) : F4{};
    if (a.weight) w[u] = in ? ld4(a.weight, a.weight_dtype, i, n, vec_in) : F4{};
  }
  const int64_t pos = a.positions_i64 ? static_cast<const int64_t*>(a.positions)[t]
                                      : static_cast<const int32_t*>(a.positions)[t];
  // sum of squares: norm.cu's order exactly (RMS: mean 0, so x - mean == x)
  float ss = 0.f;
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t i = 4 * (threadIdx.x + static_cast<int64_t>(u) * blockDim.x);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float v = i + e < n ? x[u].v[e] : 0.f;
      ss = fmaf(v, v, ss);
    }
  }
  const float inv = 1.0f / sqrtf(block_sum(ss, scratch) / static_cast<float>(n) + a.eps);
  const int64_t rope_end = a.rope_offset + 2 * static_cast<int64_t>(a.pairs);
  F4 y[U];
#pragma unroll
  for (int u = 0; u < U; ++u) {
    const int64_t i = 4 * (threadIdx.x + static_cast<int64_t>(u) * blockDim.x);
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float v = x[u].v[e] * inv;
      if (a.weight) v *= w[u].v[e];
      y[u].v[e] = v;
    }
#pragma unroll
    for (int k = 0; k < 2; ++k) {  // pairs (i, i+1) and (i+2, i+3)
      const int64_t j = i + 2 * k;
      if (j < a.rope_offset || j >= rope_end) continue;
      const int pi = static_cast<int>((j - a.rope_offset) / 2);
      rope_rotate_pair(y[u].v[2 * k], y[u].v[2 * k + 1], pos, a.inv_freq[pi], a.attention_factor, false, y[u].v[2 * k],
                       y[u].v[2 * k + 1]);
    }
#pragma unroll
    for (int e = 0; e < 4; ++e) y[u].v[e] = bf16_bits_to_f32(f32_to_bf16_bits(y[u].v[e]));  // the one rounding
    if (orow && i < n) st4(orow, DType::BF16, i, n, vec_out, y[u]);
  }
  if constexpr (MODEL1) {
    // U == 1, blockDim == 128, n == 512: thread i holds y[0] = values [4i, 4i + 4)
    const int tid = threadIdx.x;
    const F4& v = y[0];
    float amax = formats::amax_update(formats::amax_update(0.f, v.v[0]), v.v[1]);
    amax = formats::amax_update(formats::amax_update(amax, v.v[2]), v.v[3]);
#pragma unroll
    for (int o = 8; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));  // within a half warp
    const int64_t slot = a.slots[t];
    if (slot < 0 || slot >= a.num_slots) return;  // CTA-uniform, after the last shuffle
    const int P = a.page_size;
    uint8_t* td = a.cache + M1::data_offset(slot, P);
    uint8_t* sc = a.cache + M1::scale_offset(slot, P);
    if (tid < M1::kNope / 4) {
      const uint8_t e = formats::e4m3_scale_ue8m0(amax);
      const float scale = ue8m0_to_f32(e);
      uint32_t q = 0;
#pragma unroll
      for (int k = 0; k < 4; ++k) q |= static_cast<uint32_t>(formats::quantize_e4m3(v.v[k], scale)) << (8 * k);
      reinterpret_cast<uint32_t*>(td)[tid] = q;
      if (tid % (M1::kGroup / 4) == 0) sc[tid / (M1::kGroup / 4)] = e;
    } else {
      const int r = tid - M1::kNope / 4;  // 0..15: rope values [4r, 4r + 4)
      uint32_t* dst = reinterpret_cast<uint32_t*>(td + M1::kRopeOffset) + 2 * r;
      dst[0] = f32_to_bf16_bits(v.v[0]) | (static_cast<uint32_t>(f32_to_bf16_bits(v.v[1])) << 16);
      dst[1] = f32_to_bf16_bits(v.v[2]) | (static_cast<uint32_t>(f32_to_bf16_bits(v.v[3])) << 16);
      if (r == 0) sc[M1::kGroups] = 0;
    }
    if (slot % P == 0) {
      uint8_t* page = a.cache + static_cast<size_t>(slot / P) * M1::page_bytes(P);
      const size_t used = static_cast<size_t>(P) * M1::kLogicalBytes, total = M1::page_bytes(P);
      for (size_t i = used + tid; i < total; i += blockDim.x) page[i] = 0;
    }
  }
}

template <bool MODEL1>
void launch(const NormRopeArgs& a, int U, unsigned grid, int threads, bool vin, bool vout) {
  auto s = DSA_CURRENT_STREAM;
  if (U == 1)
    pdl::launch(norm_rope_kernel<1, MODEL1>, grid, threads, 0, s, a, vin, vout);
  else if (U == 2)
    pdl::launch(norm_rope_kernel<2, false>, grid, threads, 0, s, a, vin, vout);
  else if (U == 4)
    pdl::launch(norm_rope_kernel<4, false>, grid, threads, 0, s, a, vin, vout);
  else
    pdl::launch(norm_rope_kernel<8, false>, grid, threads, 0, s, a, vin, vout);
  cuda_launch::check_launch("norm_rope_kernel");
}

void run(const NormRopeArgs& a, bool model1) {
  if (a.pairs < 1 || a.pairs > kRopeMaxPairs) cuda_launch::launch_error("norm_rope: rope_dim / 2 outside 1..128");
  const int U = row_norm_reg_groups_per_thread(a.dim);
  if (U < 1) cuda_launch::launch_error("norm_rope: rows longer than kRegMaxCols");
  const int64_t rows = a.tokens * a.heads_padded;
  if (rows == 0) return;
  if (rows > 0x7fffffffLL) cuda_launch::launch_error("norm_rope: too many rows for one grid");
  const int64_t groups = (a.dim + 3) / 4;
  const int threads = static_cast<int>(((groups + U - 1) / U + 31) / 32 * 32);
  const bool vin = vec4_ok(a.x, a.x_dtype, a.dim, a.x_token_stride) && vec4_ok(a.x, a.x_dtype, a.dim, a.x_head_stride) &&
                   vec4_ok(a.weight, a.weight_dtype, a.dim, 0);
  const bool vout = vec4_ok(a.out, DType::BF16, a.dim, a.out_token_stride) &&
                    vec4_ok(a.out, DType::BF16, a.dim, a.out_head_stride);
  if (model1) {
    if (U != 1 || threads != 128 || a.dim != M1::kDim || a.heads != 1 || a.heads_padded != 1)
      cuda_launch::launch_error("norm_rope_model1: needs one 512-wide head per token");
    launch<true>(a, U, static_cast<unsigned>(rows), threads, vin, vout);
  } else {
    launch<false>(a, U, static_cast<unsigned>(rows), threads, vin, vout);
  }
}

}  // namespace

void norm_rope(const NormRopeArgs& a) { run(a, false); }
void norm_rope_model1(const NormRopeArgs& a) { run(a, true); }

}  // namespace dsa::ops::cuda
