// head_matmul through cuBLASLt for prefill-sized bf16 problems: one strided-batched GEMM with a
// batch entry per head, so the tensor cores do the work the SIMT kernel (tensor_ops.cu) does for
// decode. Per head, row-major out_h[T][N] = x_h[T][K] w_h[N][K]^T is the column-major
// D(N x T) = op(A) B with A = w_h seen as K x N (ld K, transa = T) and B = x_h as K x T
// (ld = token stride); the head is the batch index (batch offsets: N*K for w, the head strides
// for x and out), which walks the [T][H][*] layouts in place, views included. bf16 inputs, f32
// accumulation, bf16 or f32 out. Plans are cached per problem; handle and workspace are the
// process-wide ones of ops/linear/cublaslt_context.h (legacy default stream, single device).
#include "dsa/ops/tensor/tensor_ops_cuda.h"

#ifdef DSA_WITH_CUDA
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <map>
#include <mutex>

#include "dsa/core/cuda_check.h"
#include "dsa/core/cuda_stream.h"
#include "dsa/ops/linear/cublaslt_context.h"
#include "dsa/core/error.h"

namespace dsa::ops::cuda {
namespace {

using cublaslt::Plan;

cublasLtMatrixLayout_t layout(cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                              int64_t batch_offset) {
  cublasLtMatrixLayout_t l = nullptr;
  DSA_CUBLASLT_CHECK("head_matmul", cublasLtMatrixLayoutCreate(&l, t, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld));
  const int32_t count = static_cast<int32_t>(batch);
  DSA_CUBLASLT_CHECK("head_matmul", cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
  DSA_CUBLASLT_CHECK("head_matmul", cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &batch_offset,
                                                       sizeof batch_offset));
  return l;
}

Plan& plan(const HeadMatmulArgs& a) {
  using Key = std::array<int64_t, 9>;
  static std::map<Key, Plan> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const Key key{a.tokens,       a.heads,        a.n, a.k, a.x_stride_t, a.x_stride_h, a.out_stride_t,
                a.out_stride_h, static_cast<int64_t>(a.out_dtype)};
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Plan p;
  DSA_CUBLASLT_CHECK("head_matmul", cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  DSA_CUBLASLT_CHECK("head_matmul", cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  DSA_CUBLASLT_CHECK("head_matmul", cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  p.a = layout(CUDA_R_16BF, a.k, a.n, a.k, a.heads, a.n * a.k);
  p.b = layout(CUDA_R_16BF, a.k, a.tokens, a.x_stride_t, a.heads, a.x_stride_h);
  p.d = layout(a.out_dtype == DType::F32 ? CUDA_R_32F : CUDA_R_16BF, a.n, a.tokens, a.out_stride_t, a.heads,
               a.out_stride_h);
  cublaslt::choose_algo(p, "head_matmul");
  return cache.emplace(key, p).first->second;
}

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

}  // namespace

bool head_matmul_cublaslt(const HeadMatmulArgs& a) {
  if (a.x_dtype != DType::BF16 || a.w_dtype != DType::BF16) return false;
  if (a.out_dtype != DType::BF16 && a.out_dtype != DType::F32) return false;
  if (a.tokens < 2 || a.heads < 1 || a.n < 1 || a.k < 1 || a.heads > INT32_MAX) return false;
  // Leading dimensions must cover a column; 16-byte aligned pointers, leading dims and batch
  // offsets keep cuBLASLt on its vectorized kernels (8 bf16 / 4 f32 elements).
  const int64_t out_vec = a.out_dtype == DType::F32 ? 4 : 8;
  if (a.x_stride_t < a.k || a.out_stride_t < a.n) return false;
  if (!aligned16(a.x) || !aligned16(a.w) || !aligned16(a.out)) return false;
  if (a.k % 8 || a.x_stride_t % 8 || a.x_stride_h % 8 || a.out_stride_t % out_vec || a.out_stride_h % out_vec ||
      (a.n * a.k) % 8)
    return false;
  Plan& p = plan(a);
  if (!p.ok) return false;
  const float alpha = 1.f, beta = 0.f;
  const cublaslt::Context& ctx = cublaslt::context();
  DSA_CUBLASLT_CHECK("head_matmul", cublasLtMatmul(ctx.handle, p.op, &alpha, a.w, p.a, a.x, p.b, &beta, a.out, p.d, a.out, p.d, &p.algo,
                                     ctx.workspace, ctx.workspace_bytes, DSA_CURRENT_STREAM));
  return true;
}

}  // namespace dsa::ops::cuda
#endif
