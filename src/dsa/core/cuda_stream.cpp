#include "dsa/core/cuda_stream.h"

#include <atomic>

#include "dsa/core/error.h"

#ifdef DSA_WITH_CUDA
#include <cuda_runtime.h>

#include "dsa/core/cuda_check.h"
#endif

namespace dsa::cuda_stream {

namespace {
thread_local void* t_current = nullptr;
std::atomic<int64_t> g_d2h{0}, g_h2d{0}, g_sync{0};
}  // namespace

void* current() { return t_current; }
void set_current(void* s) { t_current = s; }

HostWaits host_waits() { return {g_d2h.load(), g_h2d.load(), g_sync.load()}; }
void count_d2h() { ++g_d2h; }
void count_h2d_sync() { ++g_h2d; }
void count_sync() { ++g_sync; }

#ifdef DSA_WITH_CUDA
Stream::Stream(int device) : device_(device) {
  DSA_CUDA_CHECK(cudaSetDevice(device));
  cudaStream_t s = nullptr;
  DSA_CUDA_CHECK(cudaStreamCreate(&s));
  s_ = s;
}
Stream::~Stream() {
  if (s_) cudaStreamDestroy(static_cast<cudaStream_t>(s_));
}
void synchronize() {
  count_sync();
  DSA_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(current())));
}
#else
Stream::Stream(int device) : device_(device) { fail("CUDA stream on cuda:{}: this build has no CUDA", device); }
Stream::~Stream() = default;
void synchronize() {}
#endif

}  // namespace dsa::cuda_stream
