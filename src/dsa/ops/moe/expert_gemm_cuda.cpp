// Expert GEMM on CUDA (grouped and dense): arguments, the dense split-K plan and its workspace,
// launch.
#include "dsa/ops/moe/expert_gemm_cuda.h"

#ifdef DSA_WITH_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "dsa/core/cuda_launch.h"
#include "dsa/core/cuda_memory.h"
#include "dsa/core/cuda_stream.h"
#include "dsa/core/pdl.h"
#include "dsa/core/stream_scratch.h"
#include "dsa/ops/moe/cuda/expert_gemm_args.h"
#include "dsa/ops/moe/cuda_ops.h"

namespace dsa::ops::cuda {

namespace {

// Split-K scratch (core/stream_scratch.h: one per device and stream, grow-only): fp32 partials
// [splits][rows][N] and one counter per output tile. After the first calls of each shape
// (warm-up) a call allocates nothing, makes no host wait and enqueues nothing but its kernel, so
// it can be captured into a CUDA graph. The counters are zeroed once when allocated
// (cudaMemsetAsync on the stream, ordered before the first use) and every launch leaves them at
// zero.
struct SplitWorkspace {
  float* ws = nullptr;
  int32_t* counters = nullptr;
  int64_t num_counters = 0;
};

SplitWorkspace split_workspace(Device dev, int64_t floats, int64_t tiles) {
  void* stream = cuda_stream::current();
  SplitWorkspace w;
  w.ws = static_cast<float*>(
      cuda_memory::stream_scratch("moe.split_partials", dev.index, stream, static_cast<size_t>(floats) * sizeof(float)).ptr);
  const cuda_memory::Scratch c = cuda_memory::stream_scratch(
      "moe.split_counters", dev.index, stream, static_cast<size_t>(std::max<int64_t>(tiles, 1024)) * sizeof(int32_t));
  if (c.fresh) cuda_memory::memset(c.ptr, 0, c.bytes);
  w.counters = static_cast<int32_t*>(c.ptr);
  w.num_counters = static_cast<int64_t>(c.bytes / sizeof(int32_t));
  return w;
}

// The kernel arguments of one call: grouped when m_indices is given, dense otherwise.
egemm::Args make_args(const Tensor& a, const Tensor& a_rows, const Tensor& m_indices, const ExpertWeights& w,
                      const Tensor& out, const ExpertGemmParams& p) {
  egemm::Args args{};
  args.a = a.raw();
  args.a_nrows = a.size(0);
  args.a_rows = a_rows.defined() ? a_rows.data<int32_t>() : nullptr;
  args.m_indices = m_indices.defined() ? m_indices.data<int32_t>() : nullptr;
  args.rows = out.size(0);
  args.w = static_cast<const uint8_t*>(w.weight.raw());
  args.scale = w.scale.defined() ? w.scale.raw() : nullptr;
  // UE8M0 block scales are read as bytes by the kernels (exact powers of two): no conversion.
  args.scale_ue8m0 = w.format == WeightFormat::FP8Block && w.scale.dtype() != DType::F32 ? 1 : 0;
  args.E = static_cast<int>(w.experts());
  args.N = static_cast<int>(w.n());
  args.K = static_cast<int>(w.k());
  args.out = out.raw();
  args.ldo = static_cast<int>(out.size(1));
  args.swiglu = p.fuse_swiglu ? 1 : 0;
  args.limit = p.swiglu_limit;
  args.out_f32 = out.dtype() == DType::F32 ? 1 : 0;
  args.m_align = m_indices.defined() ? static_cast<int>(p.m_alignment) : 0;
  args.prefetch_w = !m_indices.defined() && pdl::prefetch_weights() ? 1 : 0;
  DSA_CHECK(args.rows / 16 < 65535, "expert_gemm (CUDA): {} rows exceed the grid limit", args.rows);
  return args;
}

void launch(const egemm::Args& args, WeightFormat format, int tactic, int chunks) {
  bool launched = false;
  if (format == WeightFormat::MXFP4)
    launched = egemm::launch_mxfp4(args, tactic);
  else if (format == WeightFormat::BF16)
    launched = egemm::launch_bf16(args, tactic);
  else
    launched = egemm::launch_fp8(args, tactic);
  DSA_CHECK(launched, "expert_gemm (CUDA): K={} ({} 128-k chunks per CTA) too large for the FP8 scale table in shared "
            "memory (tactic {})", args.K, chunks, tactic);
  cuda_launch::check_launch("expert_gemm kernel");
}

}  // namespace

void expert_gemm(const Tensor& a, const Tensor& a_rows, const Tensor& m_indices, const ExpertWeights& w, Tensor& out,
                 const ExpertGemmParams& p) {
  if (out.size(0) == 0) return;
  const egemm::Args args = make_args(a, a_rows, m_indices, w, out, p);
  const int tactic = resolve_expert_gemm_tactic(w.format, p, args.rows, args.E, args.m_indices != nullptr, args.K);
  launch(args, w.format, tactic, (args.K + 127) / 128);
}

void expert_gemm_dense(const Tensor& a, const Tensor& a_rows, const ExpertWeights& w, Tensor& out,
                       const ExpertGemmParams& p) {
  if (out.size(0) == 0) return;
  egemm::Args args = make_args(a, a_rows, Tensor(), w, out, p);
  const int tactic = resolve_expert_gemm_tactic(w.format, p, args.rows, args.E, false, args.K);
  const ExpertGemmSplit sp = expert_gemm_planned_split(w, args.rows, false, p, a.device());
  args.splits = sp.splits;
  args.split_chunks = sp.chunks;
  if (sp.splits > 1) {
    // Tiles: at most one per 8 rows and 64 weight rows (the smallest CTA of any tactic; SwiGLU:
    // 32 output columns from 64 weight rows); the launcher refuses a grid with more.
    const int64_t tiles = (args.rows + 7) / 8 * ((args.N + 63) / 64);
    const SplitWorkspace ws = split_workspace(a.device(), static_cast<int64_t>(sp.splits) * args.rows * args.N, tiles);
    args.ws = ws.ws;
    args.counters = ws.counters;
    args.num_counters = static_cast<int>(std::min<int64_t>(ws.num_counters, INT32_MAX));
  }
  launch(args, w.format, tactic, sp.chunks);
}

}  // namespace dsa::ops::cuda
#endif
