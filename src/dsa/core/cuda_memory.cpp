#include "dsa/core/cuda_memory.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "dsa/core/cuda_stream.h"
#include "dsa/core/error.h"
#include "dsa/core/log.h"

#ifdef DSA_WITH_CUDA
#include <cuda_runtime.h>

#include "dsa/core/cuda_check.h"
#endif

namespace dsa::cuda_memory {

size_t rounded_size(size_t n) {
  constexpr size_t KiB = 1024, MiB = 1024 * KiB;
  auto up = [](size_t v, size_t q) { return (v + q - 1) / q * q; };
  if (n <= MiB) return up(n, 512);
  if (n <= 64 * MiB) return up(n, MiB);
  return up(n, 16 * MiB);
}

#ifdef DSA_WITH_CUDA
namespace {

bool caching_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("DSA_CUDA_CACHE");
    return !(v && std::string(v) == "0");
  }();
  return on;
}

// One per device. free_blocks: rounded size -> blocks; live: pointer -> rounded size.
struct DeviceCache {
  std::multimap<size_t, void*> free_blocks;
  std::unordered_map<void*, size_t> live;
  CacheStats stats;
};

struct Caches {
  std::mutex mu;
  std::map<int, DeviceCache> dev;
};

// Never destroyed: blocks still cached at exit go back with the process (a cudaFree from a
// static destructor could run after the CUDA runtime has shut down).
Caches& caches() {
  static Caches* c = new Caches();
  return *c;
}

void release_locked(DeviceCache& d, int device) {
  if (d.free_blocks.empty()) return;
  cudaSetDevice(device);
  for (auto& [size, p] : d.free_blocks) {
    cudaFree(p);
    d.stats.cached_bytes -= size;
  }
  d.free_blocks.clear();
}

thread_local StepArena* t_arena = nullptr;
std::atomic<uint64_t> g_epoch{0};
void bump_epoch() { g_epoch.fetch_add(1, std::memory_order_relaxed); }

struct ArenaRegistry {
  std::mutex mu;
  std::vector<StepArena*> arenas;
};
ArenaRegistry& arenas() {
  static ArenaRegistry* r = new ArenaRegistry();
  return *r;
}
StepArena* arena_owning(const void* p) {
  ArenaRegistry& r = arenas();
  std::lock_guard<std::mutex> lock(r.mu);
  for (StepArena* a : r.arenas)
    if (a->owns(p)) return a;
  return nullptr;
}
// Whether p is an overflow block of some arena's current step (then forgotten there).
bool forget_overflow_block(void* p) {
  ArenaRegistry& r = arenas();
  std::lock_guard<std::mutex> lock(r.mu);
  for (StepArena* a : r.arenas)
    if (a->forget_overflow(p)) return true;
  return false;
}

}  // namespace

StepArena::StepArena(int device, size_t capacity) : device_(device), capacity_((capacity + 255) / 256 * 256) {
  DSA_CUDA_CHECK(cudaSetDevice(device));
  if (capacity_ > 0) {
    void* p = nullptr;
    DSA_CUDA_CHECK(cudaMalloc(&p, capacity_));
    base_ = static_cast<char*>(p);
  }
  ArenaRegistry& r = arenas();
  std::lock_guard<std::mutex> lock(r.mu);
  r.arenas.push_back(this);
}

StepArena::~StepArena() {
  bump_epoch();
  {
    ArenaRegistry& r = arenas();
    std::lock_guard<std::mutex> lock(r.mu);
    r.arenas.erase(std::find(r.arenas.begin(), r.arenas.end(), this));
  }
  if (base_) {
    cudaSetDevice(device_);
    cudaFree(base_);
  }
}

void* StepArena::try_alloc(size_t nbytes) {
  const size_t n = (nbytes + 255) / 256 * 256;
  if (used_ + n > capacity_) {
    overflow_ += n;
    high_ = std::max(high_, used_ + overflow_);
    return nullptr;
  }
  void* p = base_ + used_;
  used_ += n;
  ++live_;
  high_ = std::max(high_, used_ + overflow_);
  return p;
}

bool StepArena::owns(const void* p) const {
  const char* c = static_cast<const char*>(p);
  return base_ && c >= base_ && c < base_ + capacity_;
}

void StepArena::release(const void*) { --live_; }

void StepArena::note_overflow(void* p) {
  ArenaRegistry& r = arenas();
  std::lock_guard<std::mutex> lock(r.mu);
  overflow_live_.push_back(p);
  ++overflows_;
}

bool StepArena::forget_overflow(void* p) {  // under the registry's lock
  auto it = std::find(overflow_live_.begin(), overflow_live_.end(), p);
  if (it == overflow_live_.end()) return false;
  *it = overflow_live_.back();
  overflow_live_.pop_back();
  return true;
}

void StepArena::reset() {
  DSA_CHECK(live_ == 0, "step arena on cuda:{}: {} tensors allocated during the last step are still alive (a "
            "workspace that outlives a step must be allocated under cuda_memory::PersistentScope)", device_, live_);
  {
    ArenaRegistry& r = arenas();
    std::lock_guard<std::mutex> lock(r.mu);
    // An overflow block still alive is an ordinary cached allocation from now on, which a later
    // capture may hold: count it as memory changing hands.
    if (!overflow_live_.empty()) bump_epoch();
    overflow_live_.clear();
  }
  if (high_ > capacity_) {  // grow between steps to what the largest step needed
    bump_epoch();
    const size_t want = (high_ + high_ / 8 + 255) / 256 * 256;
    log_debug("step arena on cuda:{}: grows from {:.1f} to {:.1f} MiB (the last step needed {:.1f} MiB, {:.1f} "
              "beyond the arena)", device_, capacity_ / 1048576.0, want / 1048576.0, high_ / 1048576.0,
              overflow_ / 1048576.0);
    DSA_CUDA_CHECK(cudaSetDevice(device_));
    if (base_) DSA_CUDA_CHECK(cudaFree(base_));
    base_ = nullptr;
    void* p = nullptr;
    if (cudaMalloc(&p, want) != cudaSuccess) {  // the overflow of the last step sits in the cache
      cudaGetLastError();
      release_cached(device_);
      DSA_CUDA_CHECK(cudaSetDevice(device_));
      DSA_CUDA_CHECK(cudaMalloc(&p, want));
    }
    base_ = static_cast<char*>(p);
    capacity_ = want;
  }
  used_ = 0;
  overflow_ = 0;
}

ArenaScope::ArenaScope(StepArena& arena) : prev_(t_arena) { t_arena = &arena; }
ArenaScope::~ArenaScope() { t_arena = prev_; }
PersistentScope::PersistentScope() : prev_(t_arena) { t_arena = nullptr; }
PersistentScope::~PersistentScope() { t_arena = prev_; }

static void* alloc_cached(size_t nbytes, int device, bool bump);

void* alloc(size_t nbytes, int device) {
  if (nbytes == 0) return nullptr;
  StepArena* overflowing = nullptr;  // a step temporary that did not fit its arena
  if (t_arena && t_arena->device() == device) {
    if (void* p = t_arena->try_alloc(nbytes)) return p;
    overflowing = t_arena;
  }
  void* p = alloc_cached(nbytes, device, overflowing == nullptr);
  if (overflowing) overflowing->note_overflow(p);
  return p;
}

static void* alloc_cached(size_t nbytes, int device, bool bump) {
  if (bump) bump_epoch();
  DSA_CUDA_CHECK(cudaSetDevice(device));
  const size_t size = caching_enabled() ? rounded_size(nbytes) : nbytes;
  Caches& c = caches();
  std::lock_guard<std::mutex> lock(c.mu);
  DeviceCache& d = c.dev[device];
  if (caching_enabled()) {
    auto it = d.free_blocks.find(size);
    if (it != d.free_blocks.end()) {
      void* p = it->second;
      d.free_blocks.erase(it);
      d.stats.cached_bytes -= size;
      d.stats.allocated_bytes += size;
      d.stats.peak_allocated_bytes = std::max(d.stats.peak_allocated_bytes, d.stats.allocated_bytes);
      ++d.stats.reuses;
      d.live[p] = size;
      return p;
    }
  }
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, size);
  if (e != cudaSuccess && !d.free_blocks.empty()) {  // out of memory with blocks cached: give them back, retry
    cudaGetLastError();
    release_locked(d, device);
    e = cudaMalloc(&p, size);
  }
  if (e != cudaSuccess) {
    cudaGetLastError();
    fail("cudaMalloc of {} bytes on cuda:{} failed: {} ({} bytes in use by dsa tensors)", nbytes, device,
         cudaGetErrorString(e), d.stats.allocated_bytes);
  }
  ++d.stats.device_allocs;
  d.stats.allocated_bytes += size;
  d.stats.peak_allocated_bytes = std::max(d.stats.peak_allocated_bytes, d.stats.allocated_bytes);
  d.live[p] = size;
  return p;
}

void free(void* p, int device) noexcept {
  if (!p) return;
  if (StepArena* a = arena_owning(p)) {
    a->release(p);
    return;
  }
  if (!forget_overflow_block(p)) bump_epoch();
  Caches& c = caches();
  std::lock_guard<std::mutex> lock(c.mu);
  DeviceCache& d = c.dev[device];
  auto it = d.live.find(p);
  if (it == d.live.end()) {  // not ours (should not happen): hand it straight back
    cudaSetDevice(device);
    cudaFree(p);
    return;
  }
  const size_t size = it->second;
  d.live.erase(it);
  d.stats.allocated_bytes -= size;
  if (caching_enabled()) {
    d.free_blocks.emplace(size, p);
    d.stats.cached_bytes += size;
  } else {
    cudaSetDevice(device);
    cudaFree(p);
  }
}

CacheStats cache_stats(int device) {
  Caches& c = caches();
  std::lock_guard<std::mutex> lock(c.mu);
  return c.dev[device].stats;
}

uint64_t memory_epoch() { return g_epoch.load(std::memory_order_relaxed); }

void release_cached(int device) {
  bump_epoch();
  Caches& c = caches();
  std::lock_guard<std::mutex> lock(c.mu);
  release_locked(c.dev[device], device);
}

void reset_peak(int device) {
  Caches& c = caches();
  std::lock_guard<std::mutex> lock(c.mu);
  DeviceCache& d = c.dev[device];
  d.stats.peak_allocated_bytes = d.stats.allocated_bytes;
}

static cudaMemcpyKind kind_of(Dir dir) {
  return dir == Dir::H2D ? cudaMemcpyHostToDevice : dir == Dir::D2H ? cudaMemcpyDeviceToHost : cudaMemcpyDeviceToDevice;
}
static cudaStream_t cur() { return static_cast<cudaStream_t>(cuda_stream::current()); }

void copy(void* dst, const void* src, size_t n, Dir dir) {
  if (n == 0) return;
  DSA_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, kind_of(dir), cur()));
  if (dir == Dir::D2D) return;
  if (dir == Dir::D2H)
    cuda_stream::count_d2h();
  else
    cuda_stream::count_h2d_sync();
  DSA_CUDA_CHECK(cudaStreamSynchronize(cur()));
}
void copy_async(void* dst, const void* src, size_t n, Dir dir) {
  if (n == 0) return;
  DSA_CUDA_CHECK(cudaMemcpyAsync(dst, src, n, kind_of(dir), cur()));
}
void memset(void* p, int byte, size_t n) {
  if (n == 0) return;
  DSA_CUDA_CHECK(cudaMemsetAsync(p, byte, n, cur()));
}
void* alloc_pinned(size_t n) {
  void* p = nullptr;
  if (n == 0) return nullptr;
  DSA_CUDA_CHECK(cudaMallocHost(&p, n));
  return p;
}
void free_pinned(void* p) noexcept {
  if (p) cudaFreeHost(p);
}
#else
[[noreturn]] static void no_cuda() { fail("this dsa build has no CUDA support (configured with DSA_CUDA=OFF or no nvcc)"); }
void* alloc(size_t, int) { no_cuda(); }
void free(void*, int) noexcept {}
void copy(void*, const void*, size_t, Dir) { no_cuda(); }
void copy_async(void*, const void*, size_t, Dir) { no_cuda(); }
void memset(void*, int, size_t) { no_cuda(); }
void* alloc_pinned(size_t) { no_cuda(); }
void free_pinned(void*) noexcept {}
StepArena::StepArena(int device, size_t) : device_(device) { no_cuda(); }
StepArena::~StepArena() = default;
void StepArena::reset() {}
void* StepArena::try_alloc(size_t) { return nullptr; }
bool StepArena::owns(const void*) const { return false; }
void StepArena::release(const void*) {}
ArenaScope::ArenaScope(StepArena&) : prev_(nullptr) {}
ArenaScope::~ArenaScope() = default;
PersistentScope::PersistentScope() : prev_(nullptr) {}
PersistentScope::~PersistentScope() = default;
CacheStats cache_stats(int) { return {}; }
void release_cached(int) {}
void reset_peak(int) {}
uint64_t memory_epoch() { return 0; }
#endif

}  // namespace dsa::cuda_memory
