#include "dsa/core/stream_scratch.h"

#include <algorithm>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "dsa/core/cuda_memory.h"
#include "dsa/core/tensor.h"

namespace dsa::cuda_memory {

namespace {

struct Entry {
  Tensor current;
  std::vector<Tensor> retired;  // outgrown: a graph captured earlier may still name them
};

}  // namespace

Scratch stream_scratch(std::string_view purpose, int device, void* stream, size_t bytes) {
  static std::mutex mu;
  // Never destroyed: no CUDA frees during process exit.
  static auto* entries = new std::map<std::tuple<std::string, int, void*>, Entry>();
  std::lock_guard<std::mutex> lock(mu);
  Entry& e = (*entries)[{std::string(purpose), device, stream}];
  Scratch s;
  if (!e.current.defined() || e.current.nbytes() < bytes) {
    const size_t old = e.current.defined() ? e.current.nbytes() : 0;
    const size_t n = std::max({bytes, 2 * old, size_t{1} << 20});
    PersistentScope persistent;
    if (e.current.defined()) e.retired.push_back(e.current);
    e.current = Tensor::empty({static_cast<int64_t>(n)}, DType::U8, Device::cuda(device));
    s.fresh = true;
  }
  s.ptr = e.current.raw();
  s.bytes = e.current.nbytes();
  return s;
}

}  // namespace dsa::cuda_memory
