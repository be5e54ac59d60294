// The CUDA stream dsa enqueues work on, and a count of the operations that make the host wait.
//
// Every dsa kernel launch, asynchronous copy and library call (cuBLASLt) goes to the calling
// thread's *current stream*: the legacy default stream unless a StreamScope installed another
// (the engine's model runner owns one stream and installs it around each step). Kernel files
// include this header (it pulls in no CUDA or fmt headers) and launch with
// `static_cast<cudaStream_t>(dsa::cuda_stream::current())`.
//
// Host waits are counted so tests can assert what a step does: every synchronous device-to-host
// copy, synchronous host-to-device copy from pageable memory, memset and stream/device
// synchronisation made through core/cuda_memory.h adds to these counters. A decode step should
// perform exactly one device-to-host copy (the sampled token ids) and nothing else here.
#pragma once
#include <cstdint>

namespace dsa::cuda_stream {

void* current();             // cudaStream_t of this thread (nullptr = the legacy default stream)
void set_current(void* s);   // prefer StreamScope

// Installs `s` as this thread's current stream for the scope's lifetime.
class StreamScope {
 public:
  explicit StreamScope(void* s) : prev_(current()) { set_current(s); }
  ~StreamScope() { set_current(prev_); }
  StreamScope(const StreamScope&) = delete;
  StreamScope& operator=(const StreamScope&) = delete;

 private:
  void* prev_;
};

// An owned, non-blocking-with-respect-to-nothing CUDA stream (cudaStreamCreate: ordered with the
// legacy default stream, so stray legacy work stays correct). Throws without CUDA.
class Stream {
 public:
  explicit Stream(int device);
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  void* get() const { return s_; }
  int device() const { return device_; }

 private:
  void* s_ = nullptr;
  int device_ = 0;
};

// A second stream that part of a step branches to and rejoins, for independent work that would
// leave SMs idle on one stream (the MoE's shared expert beside the routed experts). fork() makes
// the branch wait for everything enqueued on the calling thread's current stream so far; join()
// makes the current stream wait for everything enqueued on the branch since. Events only, no
// host wait; inside a CUDA graph capture (relaxed mode) the branch becomes parallel nodes of the
// same graph. Work on the branch takes its own stream_scratch buffers (they are per stream), so
// it shares no split-K scratch with the current stream. Work on the branch must not allocate or
// free device tensors (use buffers that outlive the step, allocated before the fork or by an
// earlier call): the caching allocator and the step arena's overflow hand a freed block to the
// next alloc() on the assumption that all work runs in one stream order (cuda_memory.h). Call
// fork() and join() with the same current stream. Non-blocking stream; throws without CUDA.
class SideStream {
 public:
  explicit SideStream(int device);
  ~SideStream();
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;
  void* get() const { return s_; }
  int device() const { return device_; }
  void fork();
  void join();

 private:
  void* s_ = nullptr;
  void* fork_ev_ = nullptr;
  void* join_ev_ = nullptr;
  int device_ = 0;
};

// Host-wait counters (process-wide, all devices). Read, or take a difference around a step.
struct HostWaits {
  int64_t d2h_copies = 0;   // synchronous device-to-host copies (each waits for the stream)
  int64_t h2d_sync = 0;     // synchronous host-to-device copies / memsets (wait for the copy)
  int64_t syncs = 0;        // explicit stream or device synchronisations
  int64_t total() const { return d2h_copies + h2d_sync + syncs; }
};
HostWaits host_waits();
void count_d2h();
void count_h2d_sync();
void count_sync();

// Waits for the current stream (counted as one sync). No-op without CUDA.
void synchronize();

}  // namespace dsa::cuda_stream

// In CUDA translation units (cuda_runtime.h included): the current stream as a cudaStream_t,
// and a stream argument that defaults to it (nullptr = current).
#define DSA_CURRENT_STREAM (static_cast<cudaStream_t>(::dsa::cuda_stream::current()))
#define DSA_STREAM_OR_CURRENT(s) (static_cast<cudaStream_t>((s) ? (s) : ::dsa::cuda_stream::current()))
