#include "dsa/ops/tensor/tensor_ops.h"

#include <array>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "dsa/core/error.h"
#include "dsa/ops/norm/elem.h"
#ifdef DSA_WITH_CUDA
#include "dsa/core/cuda_launch.h"
#include "dsa/ops/tensor/tensor_ops_cuda.h"
#endif

namespace dsa::ops {

namespace {

void same_device(const char* op, const Tensor& a, const Tensor& b) {
  DSA_CHECK(a.device() == b.device(), "{}: tensors on different devices ({} and {})", op, a.str(), b.str());
}

#ifndef DSA_WITH_CUDA
[[noreturn]] void no_cuda(const char* op, const Tensor& t) {
  fail("{}: tensors are on {} but this build has no CUDA ({})", op, t.device().str(), t.str());
}
#endif

#ifdef DSA_WITH_CUDA
// Tokens from which head_matmul takes cuBLASLt: every bf16 problem the GEMV route does not take
// (T <= 16). The tiled SIMT kernel streams weights at ~0.1-0.4 TB/s, so even a weight-bound
// cuBLASLt call at 17..31 tokens beats it (V4 wo_a: ~650 us there).
constexpr int64_t kCublasLtMinTokens = cuda::kHeadMatmulGemvMaxTokens + 1;
#endif

// Element offset of flat index i (row-major over `shape`) under `strides`.
int64_t offset_of(int64_t i, const Shape& shape, const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) {
    off += (i % shape[d]) * strides[d];
    i /= shape[d];
  }
  return off;
}

}  // namespace

void copy_cast(const Tensor& dst, const Tensor& src) {
  DSA_CHECK(dst.defined() && src.defined(), "copy_cast: undefined tensor");
  check_activation_dtype("copy_cast dst", dst.dtype());
  check_activation_dtype("copy_cast src", src.dtype());
  same_device("copy_cast", dst, src);
  DSA_CHECK(dst.shape() == src.shape(), "copy_cast: shapes differ ({} <- {})", dst.str(), src.str());
  DSA_CHECK(dst.dim() <= 4, "copy_cast: at most 4 dims, got {}", dst.str());
  if (dst.device().is_cuda()) {
#ifdef DSA_WITH_CUDA
    cuda::CopyCastArgs a{};
    a.dst = dst.raw();
    a.src = src.raw();
    const int pad = 4 - static_cast<int>(dst.dim());
    for (int d = 0; d < 4; ++d) {
      const bool real = d >= pad;
      a.shape[d] = real ? dst.size(d - pad) : 1;
      a.dst_stride[d] = real ? dst.stride(d - pad) : 0;
      a.src_stride[d] = real ? src.stride(d - pad) : 0;
    }
    a.dst_dtype = dst.dtype();
    a.src_dtype = src.dtype();
    cuda_launch::set_device(dst.device().index);
    cuda::copy_cast(a);
    return;
#else
    no_cuda("copy_cast", dst);
#endif
  }
  const int64_t n = dst.numel();
  for (int64_t i = 0; i < n; ++i)
    store_f(dst.raw(), dst.dtype(), offset_of(i, dst.shape(), dst.strides()),
            load_f(src.raw(), src.dtype(), offset_of(i, src.shape(), src.strides())));
}

Tensor cast(const Tensor& x, DType to) {
  Tensor out = Tensor::empty(x.shape(), to, x.device());
  copy_cast(out, x);
  return out;
}

void add_into(const Tensor& acc, const Tensor& x) {
  same_device("add_into", acc, x);
  DSA_CHECK(acc.dtype() == DType::F32 && acc.is_contiguous() && x.is_contiguous() && acc.shape() == x.shape(),
            "add_into: needs contiguous f32 acc and x of the same shape, got {} += {}", acc.str(), x.str());
  check_activation_dtype("add_into x", x.dtype());
  if (acc.device().is_cuda()) {
#ifdef DSA_WITH_CUDA
    cuda_launch::set_device(acc.device().index);
    cuda::add_into(acc.data<float>(), x.raw(), x.dtype(), acc.numel());
    return;
#else
    no_cuda("add_into", acc);
#endif
  }
  float* a = acc.data<float>();
  for (int64_t i = 0; i < acc.numel(); ++i) a[i] += load_f(x.raw(), x.dtype(), i);
}

void embed_rows(const Tensor& table, const Tensor& ids, const Tensor& out) {
  same_device("embed_rows", table, ids);
  same_device("embed_rows", table, out);
  check_activation_dtype("embed_rows table", table.dtype());
  check_activation_dtype("embed_rows out", out.dtype());
  DSA_CHECK(table.dim() == 2 && table.is_contiguous(), "embed_rows: table must be [V][D] contiguous, got {}",
            table.str());
  const int64_t V = table.size(0), D = table.size(1);
  DSA_CHECK(ids.dim() == 1 && ids.dtype() == DType::I32 && ids.is_contiguous(), "embed_rows: ids must be i32 [T], got {}",
            ids.str());
  const int64_t T = ids.size(0);
  DSA_CHECK(out.is_contiguous() && out.size(0) == T && out.size(out.dim() - 1) == D && (out.dim() == 2 || out.dim() == 3),
            "embed_rows: out must be [{}][{}] or [{}][R][{}] contiguous, got {}", T, D, T, D, out.str());
  const int64_t R = out.dim() == 3 ? out.size(1) : 1;
  if (table.device().is_cuda()) {
#ifdef DSA_WITH_CUDA
    cuda::EmbedRowsArgs a{};
    a.table = table.raw();
    a.ids = ids.data<int32_t>();
    a.out = out.raw();
    a.vocab = V;
    a.dim = D;
    a.tokens = T;
    a.repeat = R;
    a.table_dtype = table.dtype();
    a.out_dtype = out.dtype();
    cuda_launch::set_device(table.device().index);
    cuda::embed_rows(a);
    return;
#else
    no_cuda("embed_rows", table);
#endif
  }
  for (int64_t t = 0; t < T; ++t) {
    const int32_t id = ids.data<int32_t>()[t];
    DSA_CHECK(id >= 0 && id < V, "embed_rows: token {} has id {} outside the vocabulary [0, {})", t, id, V);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t k = 0; k < D; ++k)
        store_f(out.raw(), out.dtype(), (t * R + r) * D + k, load_f(table.raw(), table.dtype(), id * D + k));
  }
}

void head_matmul(const Tensor& x, const Tensor& w, const Tensor& out) {
  same_device("head_matmul", x, w);
  same_device("head_matmul", x, out);
  check_activation_dtype("head_matmul x", x.dtype());
  check_activation_dtype("head_matmul w", w.dtype());
  check_activation_dtype("head_matmul out", out.dtype());
  DSA_CHECK(x.dim() == 3 && w.dim() == 3 && out.dim() == 3 && w.is_contiguous(), "head_matmul: x {} w {} out {}",
            x.str(), w.str(), out.str());
  const int64_t T = x.size(0), H = w.size(0), N = w.size(1), K = w.size(2);
  DSA_CHECK(x.size(1) >= H && x.size(2) == K && out.size(0) == T && out.size(1) >= H && out.size(2) == N &&
                x.stride(2) == 1 && out.stride(2) == 1,
            "head_matmul: x {} w {} out {} (x [T][>=H][K], w [H][N][K], out [T][>=H][N], last dims contiguous)",
            x.str(), w.str(), out.str());
  if (x.device().is_cuda()) {
#ifdef DSA_WITH_CUDA
    cuda::HeadMatmulArgs a{};
    a.x = x.raw();
    a.w = w.raw();
    a.out = out.raw();
    a.tokens = T;
    a.heads = H;
    a.n = N;
    a.k = K;
    a.x_stride_t = x.stride(0);
    a.x_stride_h = x.stride(1);
    a.out_stride_t = out.stride(0);
    a.out_stride_h = out.stride(1);
    a.x_dtype = x.dtype();
    a.w_dtype = w.dtype();
    a.out_dtype = out.dtype();
    cuda_launch::set_device(x.device().index);
    // Decode-sized problems (T <= 16) with bf16 weights stream the weights (GEMV kernel, any K
    // % 8 == 0); larger bf16 problems go to the tensor cores (cuBLASLt); everything else (f32
    // weights, K % 8 != 0, unaligned) to the tiled SIMT kernel.
    // DSA_HEAD_MATMUL=kernel forces the tiled kernel; DSA_HEAD_MATMUL=gemv makes a problem that
    // the GEMV route refuses an error (the tests use it to pin that route).
    const char* force = std::getenv("DSA_HEAD_MATMUL");
    const bool kernel_only = force && std::string_view(force) == "kernel";
    const bool gemv_only = force && std::string_view(force) == "gemv";
    if (!kernel_only && cuda::head_matmul_gemv(a)) return;
    DSA_CHECK(!gemv_only, "head_matmul: DSA_HEAD_MATMUL=gemv but the GEMV route does not take x {} w {} out {}",
              x.str(), w.str(), out.str());
    if (T >= kCublasLtMinTokens && !kernel_only && cuda::head_matmul_cublaslt(a)) return;
    cuda::head_matmul(a);
    return;
#else
    no_cuda("head_matmul", x);
#endif
  }
  const size_t xe = dtype_size(x.dtype()), oe = dtype_size(out.dtype());
  std::vector<float> xr(static_cast<size_t>(K));
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const char* xp = static_cast<const char*>(x.raw()) + (t * x.stride(0) + h * x.stride(1)) * xe;
      for (int64_t k = 0; k < K; ++k) xr[k] = load_f(xp, x.dtype(), k);
      char* op = static_cast<char*>(out.raw()) + (t * out.stride(0) + h * out.stride(1)) * oe;
      for (int64_t n = 0; n < N; ++n) {
        float s = 0.f;
        for (int64_t k = 0; k < K; ++k) s += xr[k] * load_f(w.raw(), w.dtype(), (h * N + n) * K + k);
        store_f(op, out.dtype(), n, s);
      }
    }
}

}  // namespace dsa::ops
