#include "dsa/tune/timing.h"

#include <algorithm>
#include <chrono>
#include <vector>

#include "dsa/core/error.h"

#ifdef DSA_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace dsa::tune {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

#ifdef DSA_WITH_CUDA
// Collects the error a tactic left behind. A sticky error (the context is unusable) cannot be
// recovered in-process: it becomes a dsa::Error naming the op and tactic.
std::string cuda_error_after(TunableOp& op, const Tactic& t, cudaStream_t s) {
  cudaError_t e = cudaStreamSynchronize(s);
  if (e == cudaSuccess) e = cudaGetLastError();
  if (e == cudaSuccess) return "";
  cudaGetLastError();  // clears non-sticky errors
  if (cudaDeviceSynchronize() != cudaSuccess)
    throw CudaContextLost(fmt::format(
        "tuning {} tactic {} ({}) broke the CUDA context: {}; nothing can run on this device any more "
        "(this is a bug in that tactic's kernel)",
        op.name(), t.id, t.description, cudaGetErrorString(e)));
  return fmt::format("CUDA error: {}", cudaGetErrorString(e));
}

struct CudaSetDevice {
  explicit CudaSetDevice(int idx) {
    cudaGetDevice(&prev);
    if (prev != idx) cudaSetDevice(idx);
  }
  ~CudaSetDevice() { cudaSetDevice(prev); }
  int prev = 0;
};
#endif

}  // namespace

std::string run_once(TunableOp& op, int tactic, const Dims& dims) {
  try {
#ifdef DSA_WITH_CUDA
    if (op.device().is_cuda()) {
      CudaSetDevice dev(op.device().index);
      op.run(tactic, dims);
      return cuda_error_after(op, Tactic{tactic, ""}, static_cast<cudaStream_t>(op.stream()));
    }
#endif
    op.run(tactic, dims);
    return "";
  } catch (const CudaContextLost&) {
    throw;
  } catch (const Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    return e.what();
  }
}

TacticTiming time_tactic(TunableOp& op, const Tactic& tactic, const Dims& dims, const TimingOptions& opt) {
  DSA_CHECK(opt.warmups >= 0 && opt.repeats >= 1, "tuning: warmups {} / repeats {} (need >= 0 / >= 1)", opt.warmups,
            opt.repeats);
  TacticTiming r;
  r.tactic = tactic;
  std::vector<double> us;
  us.reserve(opt.repeats);
#ifdef DSA_WITH_CUDA
  if (op.device().is_cuda()) {
    CudaSetDevice dev(op.device().index);
    auto s = static_cast<cudaStream_t>(op.stream());
    cudaEvent_t a = nullptr, b = nullptr;
    if (cudaEventCreate(&a) != cudaSuccess || cudaEventCreate(&b) != cudaSuccess)
      fail("tuning {}: cannot create CUDA events", op.name());
    struct Events {
      cudaEvent_t a, b;
      ~Events() {
        cudaEventDestroy(a);
        cudaEventDestroy(b);
      }
    } events{a, b};
    try {
      for (int i = 0; i < opt.warmups; ++i) op.run(tactic.id, dims);
      if (std::string err = cuda_error_after(op, tactic, s); !err.empty()) {
        r.error = err;
        return r;
      }
      for (int i = 0; i < opt.repeats; ++i) {
        cudaEventRecord(a, s);
        op.run(tactic.id, dims);
        cudaEventRecord(b, s);
        if (std::string err = cuda_error_after(op, tactic, s); !err.empty()) {
          r.error = err;
          return r;
        }
        float ms = 0;
        cudaEventElapsedTime(&ms, a, b);
        us.push_back(ms * 1000.0);
      }
    } catch (const CudaContextLost&) {
      throw;
    } catch (const Error& e) {
      cuda_error_after(op, tactic, s);  // drain what was queued before the throw
      r.error = e.what();
      return r;
    } catch (const std::exception& e) {
      r.error = e.what();
      return r;
    }
    r.ok = true;
    r.median_us = median(us);
    return r;
  }
#endif
  DSA_CHECK(!op.device().is_cuda(), "tuning {}: op runs on {} but this build has no CUDA", op.name(),
            op.device().str());
  try {
    for (int i = 0; i < opt.warmups; ++i) op.run(tactic.id, dims);
    for (int i = 0; i < opt.repeats; ++i) {
      auto t0 = std::chrono::steady_clock::now();
      op.run(tactic.id, dims);
      auto t1 = std::chrono::steady_clock::now();
      us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
  } catch (const std::exception& e) {
    r.error = e.what();
    return r;
  }
  r.ok = true;
  r.median_us = median(us);
  return r;
}

}  // namespace dsa::tune
