// cuBLASLt paths of the dense linear layers: bf16 GEMM and block-scaled FP8 GEMM
// (A = weight with BLK128x128_32F scales, B = activations with VEC128_32F scales).
// Row-major out[T][N] = x[T][K] W[N][K]^T is the column-major D(N x T) = op(A) B with
// A = W seen as K x N column-major and transa = T ("TN", the layout FP8 GEMMs require).
// Descriptors and the chosen algorithm are cached per shape (FP8: per shape and stream, since
// each call sets its scale pointers on the descriptor); the workspace is the stream's
// (cublaslt_context.h), so ranks on their own threads and streams never share mutable state.
#include "dsa/ops/linear/cuda_ops.h"

#ifdef DSA_WITH_CUDA
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "dsa/core/cuda_check.h"
#include "dsa/core/cuda_launch.h"
#include "dsa/core/cuda_memory.h"
#include "dsa/core/stream_scratch.h"
#include "dsa/core/cuda_stream.h"
#include "dsa/ops/linear/cublaslt_context.h"
#include "dsa/ops/linear/cuda/kernels.h"

namespace dsa::ops {
namespace {

using cublaslt::Plan;

// Scale layouts cuBLASLt is given (the GPU test tries every combination; the default is the
// one that test found correct). A (weight): 0 = [NB][KB] (kb fastest), 1 = [KB][NB],
// 2 = [KB][round_up(NB,4)]. B (activations): 0 = [T][KB], 1 = [KB][T].
std::pair<int, int> scale_layout() {
  int a = 0, b = 1;
  if (const char* s = std::getenv("DSA_CUBLASLT_SCALE_LAYOUT")) std::sscanf(s, "%d,%d", &a, &b);
  return {a, b};
}

// Builds (or fetches) the plan for one problem. fp8: block-scaled e4m3 x e4m3 -> bf16.
Plan& plan(bool fp8, int64_t T, int64_t N, int64_t K, bool out_f32) {
  static std::map<std::tuple<bool, int64_t, int64_t, int64_t, bool, cudaStream_t>, Plan> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  auto key = std::make_tuple(fp8, T, N, K, out_f32, fp8 ? DSA_CURRENT_STREAM : cudaStream_t{});
  auto it = cache.find(key);
  if (it != cache.end()) return it->second;
  Plan p;
  DSA_CUBLASLT_CHECK("linear", cublasLtMatmulDescCreate(&p.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  DSA_CUBLASLT_CHECK("linear", cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  DSA_CUBLASLT_CHECK("linear", cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  const cudaDataType_t in = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  if (fp8) {
    int32_t ma = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, mb = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    DSA_CUBLASLT_CHECK("linear", cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &ma, sizeof ma));
    DSA_CUBLASLT_CHECK("linear", cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mb, sizeof mb));
    // Placeholder scale pointers for the heuristic query; the real ones are set per call.
    static float* dummy = nullptr;
    if (!dummy) DSA_CUDA_CHECK(cudaMalloc(&dummy, 4096 * sizeof(float)));
    DSA_CUBLASLT_CHECK("linear", cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &dummy, sizeof dummy));
    DSA_CUBLASLT_CHECK("linear", cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &dummy, sizeof dummy));
  }
  DSA_CUBLASLT_CHECK("linear", cublasLtMatrixLayoutCreate(&p.a, in, K, N, K));
  DSA_CUBLASLT_CHECK("linear", cublasLtMatrixLayoutCreate(&p.b, in, K, T, K));
  DSA_CUBLASLT_CHECK("linear", cublasLtMatrixLayoutCreate(&p.d, out_f32 ? CUDA_R_32F : CUDA_R_16BF, N, T, N));
  cublaslt::choose_algo(p, "linear");
  return cache.emplace(key, p).first->second;
}

// Weight scales in the layout cuBLASLt is given, converted once per (tensor, layout). The entry
// holds the source tensor too: while it is cached its memory cannot be freed and handed to
// another weight's scales, whose address would then find this entry's stale conversion.
const float* weight_scales(const Tensor& scale, int layout) {
  struct Converted {
    Tensor source, out;
  };
  static std::map<std::tuple<const void*, int, int64_t, int64_t>, Converted> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  const int64_t NB = scale.size(0), KB = scale.size(1);
  auto key = std::make_tuple(scale.raw(), layout, NB, KB);
  auto it = cache.find(key);
  if (it != cache.end()) return it->second.out.data<float>();
  const int64_t ld = layout == 2 ? (NB + 3) / 4 * 4 : NB;
  cuda_memory::PersistentScope persistent;  // cached across steps
  Tensor out = Tensor::zeros({layout == 0 ? NB * KB : KB * ld}, DType::F32, scale.device());
  cuda::launch_weight_scales(scale.raw(), scale.dtype() == DType::F32, NB, KB, layout, ld, out.data<float>());
  cuda_launch::check_launch("weight_scale_kernel");
  return cache.emplace(key, Converted{scale, out}).first->second.out.data<float>();
}

}  // namespace

bool cublaslt_fp8_block_supported(int dev) {
  static std::map<int, bool> known;
  static std::mutex mu;  // tensor-parallel rank threads ask at the same time
  std::lock_guard<std::mutex> lock(mu);
  auto it = known.find(dev);
  if (it != known.end()) return it->second;
  int count = 0;
  bool ok = false;
  if (cudaGetDeviceCount(&count) == cudaSuccess && dev < count) {
    int cur = 0;
    cudaGetDevice(&cur);
    cudaSetDevice(dev);
    ok = plan(true, 128, 256, 256, false).ok;
    cudaSetDevice(cur);
  }
  known[dev] = ok;
  return ok;
}

bool cublaslt_fp8_block_has_algo(int64_t T, int64_t N, int64_t K) {
  return T > 0 && N > 0 && K % 128 == 0 && plan(true, T, N, K, false).ok;
}

namespace cuda {

void linear_bf16(const Tensor& x, const Tensor& w, Tensor& out) {
  const int64_t T = x.size(0), K = x.size(1), N = w.size(0);
  if (T == 0 || N == 0) return;
  Plan& p = plan(false, T, N, K, out.dtype() == DType::F32);
  DSA_CHECK(p.ok, "linear_bf16: cuBLASLt found no algorithm for T={} N={} K={}", T, N, K);
  const float alpha = 1.f, beta = 0.f;
  const cublaslt::Context& ctx = cublaslt::context();
  DSA_CUBLASLT_CHECK("linear", cublasLtMatmul(ctx.handle, p.op, &alpha, w.raw(), p.a, x.raw(), p.b, &beta, out.raw(), p.d, out.raw(),
                                  p.d, &p.algo, ctx.workspace, ctx.workspace_bytes, DSA_CURRENT_STREAM));
}

bool linear_fp8_block_cublaslt(const Tensor& x, const Fp8BlockWeight& w, Tensor& out) {
  const int64_t T = x.size(0), K = x.size(1), N = w.weight.size(0);
  if (T == 0 || N == 0) return true;
  if (!plan(true, T, N, K, false).ok) return false;
  const auto [la, lb] = scale_layout();
  // Activations: e4m3 values and fp32 scales, in the stream's grow-only scratch.
  cublaslt::Context& ctx = cublaslt::context();
  const int dev = x.device().index;
  void* stream = DSA_CURRENT_STREAM;
  Tensor qv = Tensor::from_blob(
      cuda_memory::stream_scratch("linear.fp8_act", dev, stream, static_cast<size_t>(T * K)).ptr, {T, K}, DType::E4M3,
      x.device());
  Tensor sv = Tensor::from_blob(cuda_memory::stream_scratch("linear.fp8_act_scale", dev, stream,
                                                            static_cast<size_t>(T * (K / 128)) * sizeof(float))
                                    .ptr,
                                {T * (K / 128)}, DType::F32, x.device());
  cuda::launch_act_quant(x.raw(), T, K, static_cast<uint8_t*>(qv.raw()), sv.data<float>(), lb == 1, nullptr);
  cuda_launch::check_launch("act_quant_kernel");
  Plan& p = plan(true, T, N, K, false);
  const float* ws = weight_scales(w.scale, la);
  const void* as = sv.raw();
  DSA_CUBLASLT_CHECK("linear", cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &ws, sizeof ws));
  DSA_CUBLASLT_CHECK("linear", cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &as, sizeof as));
  const float alpha = 1.f, beta = 0.f;
  DSA_CUBLASLT_CHECK("linear", cublasLtMatmul(ctx.handle, p.op, &alpha, w.weight.raw(), p.a, qv.raw(), p.b, &beta, out.raw(), p.d,
                                  out.raw(), p.d, &p.algo, ctx.workspace, ctx.workspace_bytes, DSA_CURRENT_STREAM));
  return true;
}

}  // namespace cuda
}  // namespace dsa::ops
#endif
