// Host side of the portable CUDA sparse-MLA backend (see decode_kernel.cuh for the kernel).
#ifdef DSA_WITH_CUDA
#include "dsa/ops/sparse_mla/cuda/portable/launch.h"

#include <cuda_runtime.h>

#include <cmath>
#include <mutex>
#include <vector>

#include "dsa/core/cuda_check.h"
#include "dsa/core/cuda_launch.h"
#include "dsa/core/cuda_stream.h"
#include "dsa/core/stream_scratch.h"
#include "dsa/core/device.h"
#include "dsa/formats/kv_layout.h"
#include "dsa/ops/sparse_mla/cuda/portable/kernel_args.h"

namespace dsa::ops::sparse_mla_cuda {
namespace {

int log2_exact(int v) {
  int s = 0;
  while ((1 << s) < v) ++s;
  return s;
}

void fill_cache(DecodeArgs& a, int w, const SparseKeyList& l) {
  a.cache[w] = l.cache.data.data<uint8_t>();
  a.page_shift[w] = log2_exact(l.cache.page_size);
  a.page_bytes[w] = static_cast<int64_t>(l.cache.page_bytes());
  a.num_slots[w] = l.cache.num_slots();
  a.idx[w] = l.indices.data<int32_t>();
  a.idx_k[w] = static_cast<int>(l.indices.size(1));
  a.len[w] = l.lengths.defined() ? l.lengths.data<int32_t>() : nullptr;
}

}  // namespace

std::optional<std::string> unsupported_reason(int device) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || device < 0 || device >= n) {
    cudaGetLastError();
    return "no CUDA device " + std::to_string(device);
  }
  cudaDeviceProp prop{};
  DSA_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  if (prop.major * 10 + prop.minor < 89)
    return "compute capability " + std::to_string(prop.major) + "." + std::to_string(prop.minor) +
           " < 8.9 (needs e4m3 conversion instructions)";
  // A kernel image for this device exists iff its attributes can be queried there.
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  int prev = 0;
  cudaGetDevice(&prev);
  cudaSetDevice(device);
  cudaFuncAttributes attr{};
  cudaError_t e = static_cast<cudaError_t>(probe_decode_kernel(&attr));
  cudaSetDevice(prev);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return std::string("no sparse-MLA kernel image for this device in this build (") + cudaGetErrorString(e) +
           "); build with its arch in DSA_CUDA_ARCHS";
  }
  return std::nullopt;
}

void launch(const SparseMlaParams& p, const SparseMlaTactic& t) {
  DSA_CHECK(t.heads_per_cta == 16 || t.heads_per_cta == 32, "sparse_mla: tactic heads_per_cta = {} (16 or 32)",
            t.heads_per_cta);
  DSA_CHECK(p.heads() % t.heads_per_cta == 0, "sparse_mla: tactic heads_per_cta = {} does not divide H = {}",
            t.heads_per_cta, p.heads());
  DSA_CHECK(t.splits >= 1 && t.splits <= 64, "sparse_mla: tactic splits = {} (1..64)", t.splits);
  const int dev = p.q.device().index;
  DSA_CUDA_CHECK(cudaSetDevice(dev));

  DecodeArgs a{};
  a.q = p.q.data<uint16_t>();
  fill_cache(a, 0, p.main);
  if (p.extra) {
    fill_cache(a, 1, *p.extra);
  } else {
    a.cache[1] = nullptr;
    a.idx[1] = nullptr;
    a.len[1] = nullptr;
    a.idx_k[1] = 0;
    a.num_slots[1] = 0;
    a.page_shift[1] = 0;
    a.page_bytes[1] = 0;
  }
  a.sink = p.sink.defined() ? p.sink.data<float>() : nullptr;
  a.scale_log2 = p.softmax_scale * 1.4426950408889634f;
  a.T = static_cast<int>(p.tokens());
  a.H = p.heads();
  a.splits = t.splits;
  a.o = p.o.data<uint16_t>();
  a.lse = p.lse.data<float>();
  if (t.splits > 1) {
    const size_t rows = static_cast<size_t>(a.T) * a.H * t.splits;
    const size_t o_bytes = rows * 512 * sizeof(float);
    // Per stream (core/stream_scratch.h): tensor-parallel ranks on one GPU run attention at the
    // same time on their own streams; one buffer per device let them overwrite each other's
    // partials. Grow-only: a captured graph keeps its address.
    auto* base = static_cast<char*>(
        cuda_memory::stream_scratch("sparse_mla.split_partials", dev, p.stream ? p.stream : cuda_stream::current(), o_bytes + rows * sizeof(float)).ptr);
    a.o_part = reinterpret_cast<float*>(base);
    a.lse_part = reinterpret_cast<float*>(base + o_bytes);
  }
  if (p.main.cache.kind == formats::KvFormat::DsMla)
    launch_decode_ds_mla(a, t.heads_per_cta, p.stream);
  else
    launch_decode_model1(a, t.heads_per_cta, p.stream);
  cuda_launch::check_launch("sparse_mla decode kernel");
  if (t.splits > 1) {
    launch_combine(a.o_part, a.lse_part, a.sink, a.T, a.H, t.splits, a.o, a.lse, p.stream);
    cuda_launch::check_launch("sparse_mla combine kernel");
  }
}

}  // namespace dsa::ops::sparse_mla_cuda
#endif  // DSA_WITH_CUDA
