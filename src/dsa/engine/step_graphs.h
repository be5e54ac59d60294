// StepGraphs: CUDA graphs of the model runner's steps, keyed by the step's shape.
//
// A step is a pure function of its shape once its inputs are on the device: the metadata tensors
// (kv/batch_metadata.h) have sizes that depend only on the tokens, requests and the bucketed
// context (index_len), every temporary comes from the step arena (same addresses for the same
// sequence of allocations), and no kernel argument is read from the host per step. So two steps
// with the same shape key, the same memory epoch (core/cuda_memory.h: no workspace created,
// grown or freed in between) and the same installed tactics (ops/tactics/tactic_chooser.h)
// launch the same kernels with the same arguments, and the second can be replayed from a graph
// captured from the first.
//
// Decode-only steps are padded to a batch bucket first (ModelRunner::set_decode_padding), so a
// key covers every batch size of its bucket; ModelRunner::capture_decode_graphs captures the
// buckets at start-up (context bucket 256) through the same policy.
// Policy (ModelRunner::run): a key's first step runs eagerly and marks the key seen; its second is
// captured (stream capture of the forward + sampler), instantiated and launched; later ones replay.
// A capture during which the memory epoch changed (a workspace grew while capturing) is dropped
// and the step runs eagerly (the next epoch's key starts over); a capture that fails otherwise
// marks its key as never to be captured again. Steps over `max_tokens` tokens (prefill) always run eagerly. At most
// `capacity` graphs are kept, the least recently used dropped first; the memory they hold is only
// their node parameters (all buffers are the arena's or persistent workspaces').
#pragma once
#include <cstdint>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

namespace dsa::engine {

// The shape key of a step: the words that determine its kernels and their arguments, hashed
// (FNV-1a) for lookup and compared whole on a hit (a hash collision never replays a wrong graph).
class ShapeKey {
 public:
  // `what` (a string literal) and `index` name the word for diff(): which field of which tensor.
  ShapeKey& add(uint64_t v, const char* what = nullptr, int index = -1) {
    words_.push_back(v);
    labels_.push_back({what, index});
    for (int i = 0; i < 8; ++i) {
      h_ ^= (v >> (8 * i)) & 0xFF;
      h_ *= 1099511628211ull;
    }
    return *this;
  }
  ShapeKey& append(const ShapeKey& o) {
    for (size_t i = 0; i < o.words_.size(); ++i) add(o.words_[i], o.labels_[i].what, o.labels_[i].index);
    return *this;
  }
  uint64_t hash() const { return h_; }
  const std::vector<uint64_t>& words() const { return words_; }
  bool operator==(const ShapeKey& o) const { return words_ == o.words_; }
  // The words that differ from `prev`, named ("logits address: 0x.. -> 0x.., upload dim[3]: 0x20 -> 0x40"),
  // at most `max_items` of them; "" when equal. Says why a step found no graph (debug log).
  std::string diff(const ShapeKey& prev, int max_items = 8) const;

 private:
  struct Label {
    const char* what;
    int index;
  };
  std::vector<uint64_t> words_;
  std::vector<Label> labels_;
  uint64_t h_ = 1469598103934665603ull;
};

struct StepGraphStats {
  int64_t captures = 0;        // graphs instantiated
  int64_t replays = 0;         // steps launched from a cached graph (captures excluded)
  int64_t eager = 0;           // eligible steps that ran eagerly (first sight of a key)
  int64_t dropped = 0;         // captures dropped (epoch changed or capture failed)
  int64_t evicted = 0;         // graphs dropped for capacity
  double capture_ms = 0;       // host time spent capturing + instantiating
  std::string last_capture_error;
};

class StepGraphs {
 public:
  struct Graph {
    void* exec = nullptr;   // cudaGraphExec_t
    int64_t nodes = 0;      // kernels, copies, memsets and event records
    int markers = 0;        // profiling events the captured forward recorded
  };

  explicit StepGraphs(int capacity = 64, int64_t max_tokens = 512) : capacity_(capacity), max_tokens_(max_tokens) {}
  ~StepGraphs();
  StepGraphs(const StepGraphs&) = delete;
  StepGraphs& operator=(const StepGraphs&) = delete;

  int64_t max_tokens() const { return max_tokens_; }
  // The cached graph of `key` (most recently used now), or nullptr.
  const Graph* find(const ShapeKey& key);
  bool seen(const ShapeKey& key) const;  // seen eagerly and never failed to capture
  void mark_seen(const ShapeKey& key);
  // A capture of `key` failed for a reason other than moving memory: it is not tried again (its
  // steps run eagerly), so an op that cannot be captured costs one failed capture, not one per step.
  void mark_failed(const ShapeKey& key);
  // Takes ownership of `g.exec`.
  const Graph* insert(const ShapeKey& key, Graph g);
  void clear();
  int64_t size() const { return static_cast<int64_t>(graphs_.size()); }
  StepGraphStats& stats() { return stats_; }
  const StepGraphStats& stats() const { return stats_; }

 private:
  struct Entry {
    ShapeKey key;
    Graph g;
    std::list<uint64_t>::iterator lru;
  };
  void erase(uint64_t hash);
  int capacity_;
  int64_t max_tokens_;
  std::unordered_map<uint64_t, Entry> graphs_;  // by key hash (one graph per hash)
  std::list<uint64_t> lru_;                     // hashes, front = most recent
  std::unordered_map<uint64_t, ShapeKey> seen_, failed_;
  StepGraphStats stats_;
};

}  // namespace dsa::engine
