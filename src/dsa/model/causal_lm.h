// CausalLM: the interface every model forward implements (DeepSeek-V4 in model/deepseek_v4/,
// GLM-5.1 in model/glm5/), so that the engine drives any of them the same way. A model declares
// the KV memory it needs (kv_requirements); the engine allocates and owns it (kv::KvManager),
// and its model runner (engine/model_runner.h) builds each step's metadata and calls forward.
// A forward takes one flat ragged batch: tokens of several requests, each request's tokens at
// consecutive positions continuing its own cached state (prefill chunks and decode steps alike).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dsa/core/tensor.h"
#include "dsa/kv/cache_spec.h"
#include "dsa/model/config.h"
#include "dsa/model/load_format.h"
#include "dsa/model/step_inputs.h"
#include "dsa/model/shard_group.h"

namespace dsa::model {

class CausalLM {
 public:
  virtual ~CausalLM() = default;
  virtual const ModelConfig& config() const = 0;
  virtual Device device() const = 0;
  // Paged caches (per layer and role) and per-request state slots this model reads and writes.
  virtual kv::KvRequirements kv_requirements() const = 0;
  // Bytes of device memory the weights take (for capacity planning and logs), and the bytes of
  // each main layer's weights (what a decode step streams per layer; dsa bench decode).
  virtual size_t weight_bytes() const = 0;
  virtual std::vector<size_t> layer_weight_bytes() const = 0;
  // Preallocates the workspaces of steps of up to `max_tokens` tokens and `max_requests`
  // requests, so that forward never allocates outside the step arena. Called by the engine once.
  virtual void reserve(int64_t max_tokens, int max_requests) = 0;
  // Runs one step on the model's device: writes f32 logits [in.logit_rows.size(0)][vocab] into
  // `logits` (contiguous, on the device), row i for token in.logit_rows[i]. On CUDA all work goes
  // to the current stream (core/cuda_stream.h) and nothing waits for the device.
  virtual void forward(const StepInputs& in, const Tensor& logits) = 0;

  // ---- speculative decoding (docs/speculative-decoding.md) ----
  // MTP layers the model runs as a drafter (0: none loaded; the checkpoint has no MTP weights).
  virtual int num_draft_layers() const { return 0; }
  // Elements of one token's hidden state handed from forward to draft (in.hidden_out /
  // in.hidden_src): V4 hc_mult * hidden (the hyper-connection streams), GLM hidden.
  virtual int64_t hidden_width() const { return config().hidden_size; }
  // One step of the first MTP layer over a ragged batch (its own caches: layer num_layers of the
  // KV manager): token t at position p carries the id of the token at p + 1 and reads hidden row
  // in.hidden_rows[t] of in.hidden_src (the target's hidden at p, or the previous draft step's
  // output); writes logits for in.logit_rows (the shared head) and, when in.hidden_out is
  // defined, the MTP block's output hidden per token (the next draft step's input).
  virtual void draft(const StepInputs& in, const Tensor& logits);
};

struct LoadModelOptions {
  bool progress = true;  // loading progress bar on stderr
  // Tensor parallelism: load this rank's shard and all-reduce over it (docs/parallelism.md);
  // null = the whole model. Must outlive the model.
  ShardGroup* shards = nullptr;
  // With shards: expert parallelism, the routed experts split by expert across the ranks instead
  // of every rank holding a slice of each (--enable-expert-parallel; docs/parallelism.md).
  bool expert_parallel = false;
  // Load the MTP layer onto the device too (speculative decoding, docs/speculative-decoding.md):
  // one more layer of memory, so only when asked for (`--speculative-tokens` > 0).
  bool mtp = false;
  // --load-format: the checkpoint (default), or dummy weights from the config alone (`dir` may
  // then be a built-in name or a directory holding only config.json; load_format.h).
  WeightSource weights;
};

// Loads a checkpoint directory (config.json + safetensors), or with opt.weights dummy weights of a
// config, onto `device` and returns the model of its architecture. Throws dsa::Error naming the file/tensor/field when anything is wrong.
std::unique_ptr<CausalLM> load_causal_lm(const std::string& dir, Device device, const LoadModelOptions& opt = {});

}  // namespace dsa::model
