// head_matmul through cuBLASLt for prefill-sized bf16 problems: one strided-batched GEMM with a
// batch entry per head, so the tensor cores do the work the SIMT kernel (tensor_ops.cu) does for
// decode. Per head, row-major out_h[T][N] = x_h[T][K] w_h[N][K]^T is the column-major
// D(N x T) = op(A) B with A = w_h seen as K x N (ld K, transa = T) and B = x_h as K x T
// (ld = token stride); the head is the batch index (batch offsets: N*K for w, the head strides
// for x and out), which walks the [T][H][*] layouts in place, views included. bf16 inputs, f32
// accumulation, bf16 or f32 out. Plans are cached per problem; one handle and an 8 MB workspace
// per process, on the legacy default stream like the kernels (single-device assumption, as in
// linear_cublaslt.cpp).
#include "dsa/ops/tensor/tensor_ops_cuda.h"

#ifdef DSA_WITH_CUDA
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <map>
#include <mutex>

#include "dsa/core/cuda_check.h"
#include "dsa/core/error.h"

namespace dsa::ops::cuda {
namespace {

#define DSA_HM_CUBLAS_CHECK(expr)                                                        \
  do {                                                                                   \
    cublasStatus_t st_ = (expr);                                                         \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                    \
      ::dsa::fail("cuBLASLt error {} in head_matmul: {}", static_cast<int>(st_), #expr); \
  } while (0)

struct Lt {
  cublasLtHandle_t h = nullptr;
  void* ws = nullptr;
  size_t ws_bytes = 8u << 20;
};
Lt& lt() {
  static Lt l = [] {
    Lt x;
    DSA_HM_CUBLAS_CHECK(cublasLtCreate(&x.h));
    DSA_CUDA_CHECK(cudaMalloc(&x.ws, x.ws_bytes));
    return x;
  }();
  return l;
}

struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  bool ok = false;
};

cublasLtMatrixLayout_t layout(cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                              int64_t batch_offset) {
  cublasLtMatrixLayout_t l = nullptr;
  DSA_HM_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&l, t, static_cast<uint64_t>(rows), static_cast<uint64_t>(cols), ld));
  const int32_t count = static_cast<int32_t>(batch);
  DSA_HM_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count));
  DSA_HM_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &batch_offset,
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
  DSA_HM_CUBLAS_CHECK(cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  DSA_HM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  DSA_HM_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  p.a = layout(CUDA_R_16BF, a.k, a.n, a.k, a.heads, a.n * a.k);
  p.b = layout(CUDA_R_16BF, a.k, a.tokens, a.x_stride_t, a.heads, a.x_stride_h);
  p.d = layout(a.out_dtype == DType::F32 ? CUDA_R_32F : CUDA_R_16BF, a.n, a.tokens, a.out_stride_t, a.heads,
               a.out_stride_h);
  cublasLtMatmulPreference_t pref;
  DSA_HM_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
  size_t ws = lt().ws_bytes;
  DSA_HM_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws));
  cublasLtMatmulHeuristicResult_t res{};
  int n = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(lt().h, p.op, p.a, p.b, p.d, p.d, pref, 1, &res, &n);
  cublasLtMatmulPreferenceDestroy(pref);
  p.ok = st == CUBLAS_STATUS_SUCCESS && n > 0;
  if (p.ok) p.algo = res.algo;
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
  DSA_HM_CUBLAS_CHECK(cublasLtMatmul(lt().h, p.op, &alpha, a.w, p.a, a.x, p.b, &beta, a.out, p.d, a.out, p.d, &p.algo,
                                     lt().ws, lt().ws_bytes, 0));
  return true;
}

}  // namespace dsa::ops::cuda
#endif
