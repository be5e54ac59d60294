#include "dsa/engine/step_graphs.h"

#include <fmt/format.h>

#ifdef DSA_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace dsa::engine {

namespace {

void destroy_exec(void* exec) {
#ifdef DSA_WITH_CUDA
  if (exec) cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(exec));
#else
  (void)exec;
#endif
}

constexpr size_t kMaxSeen = 4096;  // keys remembered for the capture-on-second-sight rule

}  // namespace

std::string ShapeKey::diff(const ShapeKey& prev, int max_items) const {
  if (words_.size() != prev.words_.size())
    return fmt::format("{} words, was {} (tensors defined or dimensions changed)", words_.size(), prev.words_.size());
  std::string out;
  int items = 0, more = 0;
  for (size_t i = 0; i < words_.size(); ++i) {
    if (words_[i] == prev.words_[i]) continue;
    if (items == max_items) {
      ++more;
      continue;
    }
    const Label& l = labels_[i];
    const std::string name = l.what == nullptr ? fmt::format("word {}", i)
                             : l.index >= 0    ? fmt::format("{}[{}]", l.what, l.index)
                                               : std::string(l.what);
    out += fmt::format("{}{}: {:#x} -> {:#x}", out.empty() ? "" : ", ", name, prev.words_[i], words_[i]);
    ++items;
  }
  if (more > 0) out += fmt::format(" and {} more", more);
  return out;
}

StepGraphs::~StepGraphs() { clear(); }

const StepGraphs::Graph* StepGraphs::find(const ShapeKey& key) {
  auto it = graphs_.find(key.hash());
  if (it == graphs_.end() || !(it->second.key == key)) return nullptr;
  lru_.splice(lru_.begin(), lru_, it->second.lru);
  return &it->second.g;
}

bool StepGraphs::seen(const ShapeKey& key) const {
  auto it = seen_.find(key.hash());
  if (it == seen_.end() || !(it->second == key)) return false;
  auto f = failed_.find(key.hash());
  return f == failed_.end() || !(f->second == key);
}

void StepGraphs::mark_seen(const ShapeKey& key) {
  if (seen_.size() >= kMaxSeen) seen_.clear();  // bounded: a forgotten key only costs one more eager step
  seen_.insert_or_assign(key.hash(), key);
}

void StepGraphs::mark_failed(const ShapeKey& key) {
  if (failed_.size() >= kMaxSeen) failed_.clear();
  failed_.insert_or_assign(key.hash(), key);
}

void StepGraphs::erase(uint64_t hash) {
  auto it = graphs_.find(hash);
  if (it == graphs_.end()) return;
  destroy_exec(it->second.g.exec);
  lru_.erase(it->second.lru);
  graphs_.erase(it);
}

const StepGraphs::Graph* StepGraphs::insert(const ShapeKey& key, Graph g) {
  erase(key.hash());  // a colliding key's graph makes room (one graph per hash)
  while (capacity_ > 0 && static_cast<int>(graphs_.size()) >= capacity_) {
    erase(lru_.back());
    ++stats_.evicted;
  }
  lru_.push_front(key.hash());
  Entry& e = graphs_[key.hash()];
  e.key = key;
  e.g = g;
  e.lru = lru_.begin();
  return &e.g;
}

void StepGraphs::clear() {
  for (auto& [hash, e] : graphs_) destroy_exec(e.g.exec);
  graphs_.clear();
  lru_.clear();
  seen_.clear();
  failed_.clear();
}

}  // namespace dsa::engine
