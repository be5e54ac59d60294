// ModelRunner: turns one scheduled batch into a model step and sampled tokens, without making the
// host wait for the device more than once.
//
// run(batch, rows):
//   1. kv.prepare(batch): pages are allocated and the step's metadata built as host tensors;
//   2. the metadata, the rows whose logits are wanted and their sampling rules are packed into a
//      pinned host mirror and uploaded with ONE asynchronous copy into a persistent device
//      buffer; the forward sees them as device tensors (model/step_inputs.h);
//   3. the forward runs on the runner's own CUDA stream, its temporaries from the step arena
//      (core/cuda_memory.h: same addresses every step of the same shape), writing logits of the
//      requested rows only;
//   4. the sampler runs on the device (ops/sampling) and the token ids come back in one
//      device-to-host copy: the step's only host wait. Rows that ask for their logits (logprobs,
//      host-side penalties) get them in one more copy.
// Steps 3-4 of a step whose shape repeats (decode) run as one CUDA graph (step_graphs.h).
// On the CPU the same steps run without the copies (the metadata is already on the host).
#pragma once
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "dsa/core/cuda_memory.h"
#include "dsa/core/cuda_stream.h"
#include "dsa/core/tensor.h"
#include "dsa/engine/step_graphs.h"
#include "dsa/kv/batch.h"
#include "dsa/kv/kv_manager.h"
#include "dsa/model/causal_lm.h"
#include "dsa/ops/sampling/sampling_row.h"

namespace dsa::engine {

// One row of a step whose logits are used: the token index in the batch and what to do with it.
struct RowRequest {
  int64_t token = 0;
  ops::SamplingRow sampling;  // how to pick the next token (sampled on the device)
  bool want_logits = false;   // also return this row's f32 logits on the host
};

struct StepResult {
  std::vector<int32_t> tokens;  // one per row: the sampled id; -1 when the row's logits are not finite
  // f32 [rows with want_logits][vocab] on the host, in the order of those rows (undefined when none).
  Tensor logits;
  std::vector<int> logits_row;  // [rows] index into `logits`, -1 when the row did not ask
};

// Speculative decoding (docs/speculative-decoding.md): what a step hands the model beyond the
// batch. Device tensors must outlive the step (allocated outside the step arena).
struct StepExtras {
  bool draft = false;  // run the MTP layer (CausalLM::draft) over KvManager::draft_metadata
  Tensor hidden_out;   // f32 [T][hidden_width] on the model's device: every token's hidden state
  Tensor hidden_src;   // f32 [S][hidden_width] on the model's device: what a draft step reads
  Tensor hidden_rows;  // i32 [T] on the HOST: row of hidden_src per token (uploaded with the metadata)
};

// What one step cost, recorded when profiling is on (dsa bench decode).
struct StepProfile {
  double host_ms = 0;             // host time from run() start until the step's work was enqueued
  double device_ms = 0;           // CUDA: forward + sampling on the device (events)
  std::vector<double> points_ms;  // CUDA: device time of each marker point (model/step_inputs.h) from the forward start
  int64_t graph_nodes = -1;       // kernels, copies and memsets of forward + sampling (stream capture); -1 = not counted
  std::string capture_error;      // why the capture failed, when it did
  enum class Graph { None, Captured, Replayed } graph = Graph::None;  // how the step ran (CUDA graphs on)
};

class ModelRunner {
 public:
  ModelRunner(model::CausalLM& lm, kv::KvManager& kv);
  ~ModelRunner();
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  // Throws kv::KvOutOfMemory (nothing changed) when the batch's pages do not fit; a scheduler
  // checks kv.can_prepare first.
  StepResult run(const kv::Batch& batch, const std::vector<RowRequest>& rows, const StepExtras* extras = nullptr);
  // The same step from metadata built elsewhere: a tensor-parallel rank above 0 (tp_ranks.h) runs
  // rank 0's metadata (the one KV bookkeeping) over its own pools, which have the same layout. The
  // runner's KV manager then only supplies the pools; nothing of its bookkeeping changes.
  StepResult run_prepared(kv::BatchMetadata meta, const std::vector<RowRequest>& rows);

  // Profiling (CUDA): times every step with events at the model's marker points; with
  // count_nodes the next step is captured as a CUDA graph (which must succeed for a step that
  // never waits for the host), its nodes counted, and the graph launched to run the step.
  void set_profiling(bool on) { profiling_ = on; }
  // CUDA graphs of repeated step shapes (step_graphs.h), on by default on CUDA; off = every step
  // eager (--enforce-eager). max_tokens: larger steps always run eagerly.
  void set_graphs(bool on, int64_t max_tokens = 512);
  const StepGraphs* graphs() const { return graphs_.get(); }
  void count_nodes_next_step() { count_nodes_ = true; }
  const StepProfile& profile() const { return profile_; }

  model::CausalLM& model() { return lm_; }
  kv::KvManager& kv() { return kv_; }
  void* stream() const { return stream_ ? stream_->get() : nullptr; }
  size_t arena_bytes() const { return arena_ ? arena_->capacity() : 0; }

 private:
  struct Upload;  // the pinned mirror and its device twin
  struct Events;  // profiling events
  // Captures compute() on the runner's stream, instantiates and launches it; keeps the graph
  // under *keep (nullptr: count its nodes and drop it). False when the capture failed or device
  // memory changed hands meanwhile (profile_.capture_error says why): nothing ran, run it eagerly.
  bool capture_step(const std::function<void()>& compute, const ShapeKey* keep, bool events,
                    const kv::BatchMetadata& meta);
  StepResult execute(kv::BatchMetadata meta, const std::vector<RowRequest>& rows, const StepExtras* extras,
                     std::chrono::steady_clock::time_point t_start);
  model::CausalLM& lm_;
  kv::KvManager& kv_;
  std::unique_ptr<cuda_stream::Stream> stream_;
  std::unique_ptr<cuda_memory::StepArena> arena_;
  std::unique_ptr<Upload> up_;
  bool profiling_ = false, count_nodes_ = false;
  StepProfile profile_;
  std::unique_ptr<Events> events_;
  std::unique_ptr<StepGraphs> graphs_;  // last: its graphs go before the memory they point into
};

}  // namespace dsa::engine
