// What the engine's model runner hands a model forward for one step: the KV manager (the pools
// and state pools the model declared, owned by the engine) and the step's metadata as DEVICE
// tensors (kv/batch_metadata.h; host-side sizes such as num_tokens() and index_len are plain
// fields). A forward reads these and never copies device data back to the host, never loops
// over the requests of the batch on the host, and takes its temporaries from the step arena
// (core/cuda_memory.h), so a step costs no host synchronisation.
#pragma once
#include "dsa/core/tensor.h"
#include "dsa/kv/batch_metadata.h"
#include "dsa/kv/kv_manager.h"

namespace dsa::model {

// Points of a forward a profiler may time (dsa bench decode): mark(l) before main layer l,
// mark(num_layers) after the last layer. Implementations record a device event on the current
// stream; they must not synchronise.
class StepMarker {
 public:
  virtual ~StepMarker() = default;
  virtual void mark(int point) = 0;
};

struct StepInputs {
  const kv::KvManager* kv = nullptr;
  const kv::BatchMetadata* meta = nullptr;  // tensors on the model's device
  Tensor logit_rows;                        // i32 [N] (device): token rows whose logits the step returns
  StepMarker* marker = nullptr;             // optional: layer boundaries for profiling
  // Speculative decoding (docs/speculative-decoding.md), all optional:
  //   hidden_out  f32 [T][hidden_width] (device, contiguous): the forward (or draft) writes every
  //               token's last hidden state there (the residual before the final norm / hyper-head)
  //   hidden_src  f32 [S][hidden_width] (device): the hidden states a draft step reads ...
  //   hidden_rows i32 [T] (device): ... row hidden_rows[t] of hidden_src for token t
  Tensor hidden_out;
  Tensor hidden_src;
  Tensor hidden_rows;

  void mark(int point) const {
    if (marker) marker->mark(point);
  }

  int64_t tokens() const { return meta->num_tokens(); }
  int requests() const { return meta->num_requests(); }
  const kv::KvPool& pool(int layer, attn::CacheRole role) const { return kv->pool(layer, role); }
  const kv::GroupMetadata& group(int layer, attn::CacheRole role) const {
    return meta->groups.at(static_cast<size_t>(kv->pool(layer, role).group));
  }
};

}  // namespace dsa::model
