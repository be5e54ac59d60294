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
// Steps 3-4 of a step whose shape repeats (decode) run as one CUDA graph (step_graphs.h); a
// decode-only step is first padded to its batch bucket (set_decode_padding), so batch sizes of a
// bucket share its graph.
// On the CPU the same steps run without the copies (the metadata is already on the host).
#pragma once
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
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
  // f32 [rows with want_logits][vocab] on the host, in the order of those rows (undefined when none);
  // a padded decode step may append repeated rows after them: index through logits_row.
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
  double wall_ms = 0;             // host time of the whole run() call, the wait for the ids included
  int64_t tokens = 0;             // tokens of the step (padding included)
  bool draft = false;             // an MTP step (StepExtras::draft)
};

// What the start-up capture of the decode buckets did (ModelRunner::capture_decode_graphs).
struct GraphCaptureReport {
  struct Bucket {
    int64_t batch = 0;
    int64_t nodes = -1;    // graph nodes; -1 when not captured
    int64_t bytes = -1;    // device memory the capture took (cudaMemGetInfo before / after); -1 unknown
    double ms = 0;         // host time of the bucket's steps (eager warm-up + capture)
    std::string error;     // why it was not captured
  };
  std::vector<Bucket> buckets;  // largest first
  int64_t index_len = 0;        // the context bucket captured
  double ms = 0;                // everything, warm-up step included
  int64_t bytes = -1;
  bool memory_moved = false;    // device memory moved after the first capture: earlier graphs are unreachable
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
  // runner's KV manager then only supplies the pools; nothing of its bookkeeping changes. extras:
  // as run's, with this rank's own hand-over buffers (speculative decoding; meta is then rank 0's
  // KvManager::draft_metadata for a draft step).
  StepResult run_prepared(kv::BatchMetadata meta, const std::vector<RowRequest>& rows,
                          const StepExtras* extras = nullptr);

  // Profiling (CUDA): times every step with events at the model's marker points; with
  // count_nodes the next step is captured as a CUDA graph (which must succeed for a step that
  // never waits for the host), its nodes counted, and the graph launched to run the step.
  void set_profiling(bool on) { profiling_ = on; }
  // CUDA graphs of repeated step shapes (step_graphs.h), on by default on CUDA; off = every step
  // eager (--enforce-eager). max_tokens: larger steps always run eagerly.
  void set_graphs(bool on, int64_t max_tokens = 512);
  const StepGraphs* graphs() const { return graphs_.get(); }
  // Decode-only steps (one token per request, no StepExtras) of at most max_batch requests are
  // padded to their batch bucket (kv::decode_batch_bucket: 1, 2, 4, ..., max_batch) with padding
  // rows (kv::pad_metadata) and greedy padding sampling rows whose tokens are dropped, and the
  // rows returning logits to a bucket of their count too, so every batch size of a bucket has one
  // shape key; 0 = off. On every device (the CPU gives the real
  // rows bit-identical results, tests/engine/test_decode_padding.cpp).
  void set_decode_padding(int64_t max_batch) { pad_max_ = std::max<int64_t>(max_batch, 0); }
  int64_t decode_padding() const { return pad_max_; }
  int64_t padded_steps() const { return padded_steps_; }
  // Distinct step shapes (shape words of the key without addresses or epoch) seen so far, every
  // step counted, on every device: what a graph cache would need (bounded at 4096, then restarts).
  int64_t step_shapes() const { return static_cast<int64_t>(shapes_.size()); }
  // CUDA, graphs and padding on: start-up capture of every decode bucket, largest first, at the
  // first context bucket (index_len_bucket(1) = 256: contexts up to 256 tokens; later context
  // buckets are captured lazily, as every other shape). First reserves the upload buffer for the
  // largest step the KV manager's limits allow and runs one eager step of max_step_tokens padding
  // tokens, so that the arena and the workspaces have grown before anything is captured. Logs
  // one line per bucket and a total. Does nothing (empty report) otherwise. Call it after the
  // tuner installed its tactics (the key holds their generation).
  GraphCaptureReport capture_decode_graphs();
  void count_nodes_next_step() { count_nodes_ = true; }
  const StepProfile& profile() const { return profile_; }
  // With profiling on, every step's profile since the last clear, in order: an engine step with
  // speculation makes several runner steps (the verification, then the MTP steps), and profile()
  // only keeps the last. Bounded (the oldest go past 4096 entries) for a caller that never clears.
  const std::vector<StepProfile>& profile_log() const { return profile_log_; }
  void clear_profile_log() { profile_log_.clear(); }

  model::CausalLM& model() { return lm_; }
  kv::KvManager& kv() { return kv_; }
  void* stream() const { return stream_ ? stream_->get() : nullptr; }
  size_t arena_bytes() const { return arena_ ? arena_->capacity() : 0; }

 private:
  struct Upload;  // the pinned mirror and its device twin
  // Steps 2-4 of run() over built metadata; rows past real_rows are padding (dropped from the result).
  StepResult execute(kv::BatchMetadata& meta, const std::vector<RowRequest>& rows, int64_t real_rows,
                     const StepExtras* extras, std::chrono::steady_clock::time_point t_start, bool bucket_want);
  struct Events;  // profiling events
  // Captures compute() on the runner's stream, instantiates and launches it; keeps the graph
  // under *keep (nullptr: count its nodes and drop it). False when the capture failed or device
  // memory changed hands meanwhile (profile_.capture_error says why): nothing ran, run it eagerly.
  bool capture_step(const std::function<void()>& compute, const ShapeKey* keep, bool events,
                    const kv::BatchMetadata& meta);
  model::CausalLM& lm_;
  kv::KvManager& kv_;
  std::unique_ptr<cuda_stream::Stream> stream_;
  std::unique_ptr<cuda_memory::StepArena> arena_;
  std::unique_ptr<Upload> up_;
  bool profiling_ = false, count_nodes_ = false;
  int64_t pad_max_ = 0, padded_steps_ = 0;
  std::set<std::vector<uint64_t>> shapes_;
  std::map<int64_t, ShapeKey> last_keys_;  // debug log: the last step key per token count
  StepProfile profile_;
  std::vector<StepProfile> profile_log_;
  std::unique_ptr<Events> events_;
  std::unique_ptr<StepGraphs> graphs_;  // last: its graphs go before the memory they point into
};

}  // namespace dsa::engine
