// Chooses the tile of the grouped expert GEMM and fills its arguments.
#include <algorithm>

#include "dsa/core/cuda_check.h"
#include "dsa/ops/moe/cuda/expert_gemm_kernel.cuh"
#include "dsa/ops/moe/cuda/expert_gemm_launch.h"
#include "dsa/ops/moe/cuda/launch.h"

namespace dsa::ops::cuda {

void expert_gemm(const Tensor& a, const Tensor& a_rows, const Tensor& m_indices, const ExpertWeights& w, Tensor& out,
                 const ExpertGemmParams& p) {
  egemm::Args args{};
  args.a = static_cast<const __nv_bfloat16*>(a.raw());
  args.a_nrows = a.size(0);
  args.a_rows = a_rows.defined() ? a_rows.data<int32_t>() : nullptr;
  args.m_indices = m_indices.defined() ? m_indices.data<int32_t>() : nullptr;
  args.rows = out.size(0);
  args.w = static_cast<const uint8_t*>(w.weight.raw());
  args.E = static_cast<int>(w.experts());
  args.N = static_cast<int>(w.n());
  args.K = static_cast<int>(w.k());
  args.out = static_cast<__nv_bfloat16*>(out.raw());
  args.ldo = static_cast<int>(out.size(1));
  args.swiglu = p.fuse_swiglu ? 1 : 0;
  args.limit = p.swiglu_limit;
  if (args.rows == 0) return;

  int tile = p.tactic;
  if (tile < 0) {
    double per_group = p.rows_per_expert_hint > 0 ? p.rows_per_expert_hint
                                                  : static_cast<double>(args.rows) / std::max(1, args.E);
    tile = per_group >= 32 ? 1 : 0;
  }
  if (args.m_indices && p.m_alignment % 64 != 0) tile = 0;

  Tensor scale_f32;
  if (w.format == WeightFormat::MXFP4) {
    args.scale = w.scale.raw();
    egemm::launch_mxfp4(args, tile);
  } else {
    if (w.scale.dtype() == DType::F32) {
      args.scale = w.scale.raw();
    } else {  // UE8M0 scales: widened per call (tiny); loaders should store fp32 to avoid this
      scale_f32 = Tensor::empty(w.scale.shape(), DType::F32, w.scale.device());
      egemm::ue8m0_to_f32(static_cast<const uint8_t*>(w.scale.raw()), scale_f32.data<float>(), w.scale.numel());
      args.scale = scale_f32.raw();
    }
    egemm::launch_fp8(args, tile);
  }
  DSA_CUDA_CHECK_LAUNCH();
  if (scale_f32.defined()) DSA_CUDA_CHECK(cudaStreamSynchronize(0));  // keep the temporary alive until used
}

}  // namespace dsa::ops::cuda
