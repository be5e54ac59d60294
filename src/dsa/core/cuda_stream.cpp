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
SideStream::SideStream(int device) : device_(device) {
  DSA_CUDA_CHECK(cudaSetDevice(device));
  cudaStream_t s = nullptr;
  DSA_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  s_ = s;
  cudaEvent_t a = nullptr, b = nullptr;
  DSA_CUDA_CHECK(cudaEventCreateWithFlags(&a, cudaEventDisableTiming));
  DSA_CUDA_CHECK(cudaEventCreateWithFlags(&b, cudaEventDisableTiming));
  fork_ev_ = a;
  join_ev_ = b;
}
SideStream::~SideStream() {
  if (fork_ev_) cudaEventDestroy(static_cast<cudaEvent_t>(fork_ev_));
  if (join_ev_) cudaEventDestroy(static_cast<cudaEvent_t>(join_ev_));
  if (s_) cudaStreamDestroy(static_cast<cudaStream_t>(s_));
}
void SideStream::fork() {
  DSA_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(fork_ev_), static_cast<cudaStream_t>(current())));
  DSA_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(s_), static_cast<cudaEvent_t>(fork_ev_), 0));
}
void SideStream::join() {
  DSA_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(join_ev_), static_cast<cudaStream_t>(s_)));
  DSA_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(current()), static_cast<cudaEvent_t>(join_ev_), 0));
}
void synchronize() {
  count_sync();
  DSA_CUDA_CHECK(cudaStreamSynchronize(static_cast<cudaStream_t>(current())));
}
#else
Stream::Stream(int device) : device_(device) { fail("CUDA stream on cuda:{}: this build has no CUDA", device); }
Stream::~Stream() = default;
SideStream::SideStream(int device) : device_(device) { fail("CUDA side stream on cuda:{}: this build has no CUDA", device); }
SideStream::~SideStream() = default;
void SideStream::fork() {}
void SideStream::join() {}
void synchronize() {}
#endif

}  // namespace dsa::cuda_stream
