// Timing helpers shared by the MoE and linear benchmarks (CUDA builds): median of CUDA-event
// timed repeats after warm-up, the measured device copy bandwidth and the bf16 cuBLAS ceiling.
#pragma once
#ifdef DSA_WITH_CUDA
#include <cuda_runtime.h>

#include <algorithm>
#include <functional>
#include <vector>

#include "dsa/core/cuda_check.h"
#include "dsa/core/cuda_stream.h"
#include "dsa/core/tensor.h"
#include "dsa/ops/linear/linear.h"
#include "dsa/ops/moe/random_fill.h"

namespace dsa::bench {

// Median microseconds of fn(i) over `reps` timed calls (i = repeat index, for input rotation).
inline double time_us(const std::function<void(int)>& fn, int warmup, int reps) {
  for (int i = 0; i < warmup; ++i) fn(i);
  DSA_CUDA_CHECK(cudaDeviceSynchronize());
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<double> v;
  for (int i = 0; i < reps; ++i) {
    cudaEventRecord(a);
    fn(i);
    cudaEventRecord(b);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    v.push_back(ms * 1e3);
  }
  DSA_CUDA_CHECK(cudaGetLastError());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Device microseconds per call of fn(0..calls-1) replayed from one CUDA graph (median of `reps`
// replays): what a call costs inside a captured decode step, without the host's launch time
// (which time_us includes whenever enqueueing takes longer than the kernel). fn runs eagerly
// once per index first, so that its temporaries are in the caching allocator before capture.
inline double time_graph_us(const std::function<void(int)>& fn, int calls, int reps) {
  cudaStream_t s = nullptr;
  DSA_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  cuda_stream::StreamScope scope(s);
  for (int i = 0; i < calls; ++i) fn(i);
  DSA_CUDA_CHECK(cudaStreamSynchronize(s));
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  DSA_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  for (int i = 0; i < calls; ++i) fn(i);
  DSA_CUDA_CHECK(cudaStreamEndCapture(s, &graph));
  DSA_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  DSA_CUDA_CHECK(cudaGraphLaunch(exec, s));
  cudaEvent_t a, b;
  cudaEventCreate(&a);
  cudaEventCreate(&b);
  std::vector<double> v;
  for (int r = 0; r < reps; ++r) {
    cudaEventRecord(a, s);
    DSA_CUDA_CHECK(cudaGraphLaunch(exec, s));
    cudaEventRecord(b, s);
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    v.push_back(ms * 1e3 / calls);
  }
  DSA_CUDA_CHECK(cudaGetLastError());
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  DSA_CUDA_CHECK(cudaStreamSynchronize(s));
  cudaStreamDestroy(s);
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Device-to-device cudaMemcpy of 1 GiB: GB/s counting read + write bytes.
inline double measured_copy_gbs() {
  const size_t n = size_t{1} << 30;
  Tensor a = Tensor::empty({static_cast<int64_t>(n)}, DType::U8, Device::cuda());
  Tensor b = Tensor::empty({static_cast<int64_t>(n)}, DType::U8, Device::cuda());
  ops::random_fill_bytes(a, 1);
  const double us = time_us([&](int) { cudaMemcpyAsync(b.raw(), a.raw(), n, cudaMemcpyDeviceToDevice); }, 2, 10);
  return 2.0 * static_cast<double>(n) / (us * 1e-6) / 1e9;
}

// bf16 cuBLASLt GEMM 8192^3: TFLOP/s (the prefill ceiling).
inline double measured_bf16_tflops() {
  const int64_t n = 8192;
  Tensor x = Tensor::empty({n, n}, DType::BF16, Device::cuda()), w = Tensor::empty({n, n}, DType::BF16, Device::cuda());
  Tensor o = Tensor::empty({n, n}, DType::BF16, Device::cuda());
  ops::random_fill_bf16(x, 2, 1.f);
  ops::random_fill_bf16(w, 3, 1.f);
  const double us = time_us([&](int) { ops::linear_bf16(x, w, o); }, 2, 10);
  return 2.0 * n * n * n / (us * 1e-6) / 1e12;
}

}  // namespace dsa::bench
#endif
