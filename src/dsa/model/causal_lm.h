// CausalLM: the interface every model forward implements (DeepSeek-V4 in model/deepseek_v4/,
// GLM-5.1 in model/glm5/), so that `dsa generate` and later the engine drive any of them the same
// way. A forward takes one flat ragged batch: tokens of several requests, each request's tokens at
// consecutive positions continuing its own state (prefill chunks and decode steps alike).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dsa/core/tensor.h"
#include "dsa/model/config.h"

namespace dsa::model {

struct ForwardBatch {
  std::vector<int32_t> token_ids;  // [N]
  std::vector<int32_t> request;    // [N] request id (from add_request)
  std::vector<int64_t> positions;  // [N] position within the request (consecutive per request)
};

// Paged KV memory of one cache group (pages shared by its pools; names as in
// engine/cache_groups.h: "tokens", "swa", "c4", "c128").
struct KvGroupUsage {
  std::string name;
  int64_t used_pages = 0, total_pages = 0;
};

class CausalLM {
 public:
  virtual ~CausalLM() = default;
  virtual const ModelConfig& config() const = 0;
  virtual Device device() const = 0;
  // Creates the per-request state (KV pages, compressor windows, ...) and returns its id.
  virtual int add_request() = 0;
  // Frees a request's state and pages.
  virtual void free_request(int id) = 0;
  // Runs the batch and returns f32 logits on the CPU: [N][vocab] when all_logits, otherwise one
  // row per request in the batch (its last token), in order of first appearance.
  virtual Tensor forward(const ForwardBatch& batch, bool all_logits = false) = 0;
  // KV pages in use per cache group (none for a model without paged KV). Reads state the
  // forwards change: call from the thread that runs them.
  virtual std::vector<KvGroupUsage> kv_usage() const { return {}; }
  // Whether one request holding `tokens` tokens of context can ever fit the KV memory (when it
  // runs alone). Fixed capacity only: any thread may ask.
  virtual bool kv_can_hold(int64_t tokens) const { (void)tokens; return true; }
};

// Loads a checkpoint directory (config.json + safetensors) onto `device` and returns the model of
// its architecture. Throws dsa::Error naming the file/tensor/field when anything is wrong.
std::unique_ptr<CausalLM> load_causal_lm(const std::string& dir, Device device);

}  // namespace dsa::model
