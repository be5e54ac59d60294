#include "dsa/engine/model_runner.h"

#include <algorithm>
#include <bit>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#include <chrono>

#include "dsa/core/error.h"
#include "dsa/core/log.h"
#include "dsa/core/trace.h"
#ifdef DSA_WITH_CUDA
#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include "dsa/core/cuda_check.h"
#endif
#include "dsa/ops/sampling/sampling.h"
#include "dsa/ops/tactics/tactic_chooser.h"
#include "dsa/ops/tensor/tensor_ops.h"

namespace dsa::engine {

namespace {

constexpr size_t kAlign = 16;
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
constexpr size_t kInitialArena = 64u << 20;  // grows to the largest step's need

// DSA_PROFILE_DECODE_STEP=K: the K-th decode-only step of the process (0-based, every request one
// token) runs between cudaProfilerStart and cudaProfilerStop, so that `ncu --profile-from-start
// off` records exactly one step and none of the tuning, warm-up or prefill kernels around it.
int64_t profile_decode_step() {
  static const int64_t k = [] {
    const char* v = std::getenv("DSA_PROFILE_DECODE_STEP");
    if (v == nullptr || *v == '\0') return int64_t{-1};
    char* end = nullptr;
    const long long n = std::strtoll(v, &end, 10);
    DSA_CHECK(end != v && *end == '\0' && n >= 0, "DSA_PROFILE_DECODE_STEP must be a step index >= 0, got '{}'", v);
    return static_cast<int64_t>(n);
  }();
  return k;
}

// The words of a step's shape, on every device: the host-side sizes the forward reads and the
// shape and dtype of every uploaded tensor (which also fixes their offsets in the upload twin).
ShapeKey shape_key(const kv::BatchMetadata& meta, const std::vector<Tensor*>& up) {
  ShapeKey k;
  k.add(meta.num_tokens(), "tokens").add(meta.num_requests(), "requests");
  k.add(static_cast<uint64_t>(meta.index_len), "index_len");
  for (size_t i = 0; i < up.size(); ++i) {
    const Tensor* t = up[i];
    const int n = static_cast<int>(i);
    k.add(t->defined(), "upload defined", n);
    if (!t->defined()) continue;
    k.add(static_cast<uint64_t>(t->dtype()), "upload dtype", n).add(t->dim(), "upload rank", n);
    for (int64_t d : t->shape()) k.add(static_cast<uint64_t>(d), "upload dim", n);
  }
  for (size_t g = 0; g < meta.groups.size(); ++g)
    k.add(static_cast<uint64_t>(meta.groups[g].num_pages), "group pages", static_cast<int>(g));
  return k;
}

// The words that fix a step's kernels and arguments (step_graphs.h): the memory epoch, the
// installed tactics' generation, which forward runs (the model's or its MTP layer's), the
// addresses of the MTP hand-over buffers, of the upload twin's tensors and of the step's outputs,
// and the step's shape (shape_key).
ShapeKey step_key(const ShapeKey& shape, const std::vector<Tensor*>& up, bool timed, const Tensor& logits,
                  const Tensor& ids, const model::StepInputs& in, bool draft) {
  ShapeKey k;
  k.add(cuda_memory::memory_epoch(), "memory epoch").add(ops::tactic_chooser_generation(), "tactics generation");
  k.add(timed, "timed").add(draft, "draft");
  int n = 0;
  for (const Tensor* t : {&in.hidden_out, &in.hidden_src}) {  // the MTP hand-over buffers (persistent)
    k.add(t->defined() ? reinterpret_cast<uintptr_t>(t->raw()) : 0, "MTP hidden address", n);
    if (t->defined())
      for (int64_t d : t->shape()) k.add(static_cast<uint64_t>(d), "MTP hidden dim", n);
    ++n;
  }
  k.add(reinterpret_cast<uintptr_t>(logits.raw()), "logits address").add(reinterpret_cast<uintptr_t>(ids.raw()), "ids address");
  for (size_t i = 0; i < up.size(); ++i)
    k.add(up[i]->defined() ? reinterpret_cast<uintptr_t>(up[i]->raw()) : 0, "upload address", static_cast<int>(i));
  k.append(shape);
  return k;
}

}  // namespace

// Pinned host mirror of everything a step uploads, and the persistent device buffer it goes to.
struct ModelRunner::Upload {
  Device dev;
  void* host = nullptr;
  size_t capacity = 0;
  Tensor device;        // u8 [capacity] on dev (persistent)
  int32_t* ids = nullptr;  // pinned: the sampled ids come back here
  size_t ids_capacity = 0;

  explicit Upload(Device d) : dev(d) {}
  ~Upload() {
    cuda_memory::free_pinned(host);
    cuda_memory::free_pinned(ids);
  }
  void reserve(size_t bytes, size_t rows) {
    cuda_memory::PersistentScope persistent;
    if (bytes > capacity) {
      const size_t cap = std::max(bytes, capacity * 2);
      cuda_memory::free_pinned(host);
      host = nullptr;
      device = Tensor();
      host = cuda_memory::alloc_pinned(cap);
      device = Tensor::empty({static_cast<int64_t>(cap)}, DType::U8, dev);
      capacity = cap;
    }
    if (rows > ids_capacity) {
      const size_t cap = std::max(rows, ids_capacity * 2);
      cuda_memory::free_pinned(ids);
      ids = nullptr;
      ids = static_cast<int32_t*>(cuda_memory::alloc_pinned(cap * sizeof(int32_t)));
      ids_capacity = cap;
    }
  }
};

// CUDA events at the start of the forward, at each marker point and after sampling.
struct ModelRunner::Events : model::StepMarker {
#ifdef DSA_WITH_CUDA
  std::vector<cudaEvent_t> points;
  cudaEvent_t start = nullptr, end = nullptr;
  int used = 0;
  bool external = false;  // recording into a graph being captured (event nodes that replays fire)
  Events() {
    DSA_CUDA_CHECK(cudaEventCreate(&start));
    DSA_CUDA_CHECK(cudaEventCreate(&end));
  }
  ~Events() override {
    for (cudaEvent_t e : points) cudaEventDestroy(e);
    cudaEventDestroy(start);
    cudaEventDestroy(end);
  }
  void mark(int point) override {
    while (static_cast<int>(points.size()) <= point) {
      cudaEvent_t e;
      DSA_CUDA_CHECK(cudaEventCreate(&e));
      points.push_back(e);
    }
    DSA_CUDA_CHECK(cudaEventRecordWithFlags(points[static_cast<size_t>(point)], DSA_CURRENT_STREAM,
                                            external ? cudaEventRecordExternal : cudaEventRecordDefault));
    used = std::max(used, point + 1);
  }
#else
  void mark(int) override {}
#endif
};

ModelRunner::ModelRunner(model::CausalLM& lm, kv::KvManager& kv) : lm_(lm), kv_(kv) {
  const Device dev = lm_.device();
  DSA_CHECK(kv_.device() == dev, "model runner: the KV cache is on {}, the model on {}", kv_.device().str(), dev.str());
  if (dev.is_cuda()) {
    stream_ = std::make_unique<cuda_stream::Stream>(dev.index);
    arena_ = std::make_unique<cuda_memory::StepArena>(dev.index, kInitialArena);
    up_ = std::make_unique<Upload>(dev);
    const char* env = std::getenv("DSA_CUDA_GRAPHS");  // 0: every step eager (debugging)
    if (!(env && std::string(env) == "0")) graphs_ = std::make_unique<StepGraphs>();
  }
}

ModelRunner::~ModelRunner() = default;

void ModelRunner::set_graphs(bool on, int64_t max_tokens) {
  graphs_.reset();
  if (on && lm_.device().is_cuda()) graphs_ = std::make_unique<StepGraphs>(64, max_tokens);
}

#ifdef DSA_WITH_CUDA
bool ModelRunner::capture_step(const std::function<void()>& compute, const ShapeKey* keep, bool events,
                               const kv::BatchMetadata& meta) {
  cudaStream_t s = DSA_CURRENT_STREAM;
  if (events) events_->external = true;  // the markers become event nodes that every replay fires
  const auto t0 = std::chrono::steady_clock::now();
  const uint64_t epoch = cuda_memory::memory_epoch();
  const uint64_t overflows = arena_->overflows();
  DSA_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
  std::string err;
  try {
    compute();
  } catch (const std::exception& e) {
    err = e.what();
  }
  if (events) events_->external = false;
  cudaGraph_t g = nullptr;
  const cudaError_t ec = cudaStreamEndCapture(s, &g);
  if (err.empty() && ec != cudaSuccess) err = cudaGetErrorString(ec);
  cudaGetLastError();
  // A workspace created or grown while capturing may have moved memory that earlier nodes use.
  // A temporary beyond the arena is a cached block that goes back to the cache after the step;
  // the arena grows at the next reset (a new epoch, so a new key), so neither marks the key failed.
  const bool moved = err.empty() && (cuda_memory::memory_epoch() != epoch || arena_->overflows() != overflows);
  if (moved)
    err = cuda_memory::memory_epoch() != epoch ? "device memory changed hands during the capture"
                                                : "the step's temporaries did not fit the step arena";
  cudaGraphExec_t exec = nullptr;
  size_t n = 0;
  if (err.empty()) {
    DSA_CUDA_CHECK(cudaGraphGetNodes(g, nullptr, &n));
    if (const cudaError_t ei = cudaGraphInstantiate(&exec, g, 0); ei != cudaSuccess) {
      err = cudaGetErrorString(ei);
      cudaGetLastError();
      exec = nullptr;
    }
  }
  if (g) cudaGraphDestroy(g);
  if (!err.empty()) {
    profile_.capture_error = err;
    if (keep) {
      ++graphs_->stats().dropped;
      graphs_->stats().last_capture_error = err;
      if (!moved) graphs_->mark_failed(*keep);
    }
    return false;
  }
  profile_.graph_nodes = static_cast<int64_t>(n);
  DSA_CUDA_CHECK(cudaGraphLaunch(exec, s));
  if (!keep) {
    DSA_CUDA_CHECK(cudaStreamSynchronize(s));  // profiling only: the exec is destroyed next
    cudaGraphExecDestroy(exec);
    return true;
  }
  graphs_->insert(*keep, {exec, static_cast<int64_t>(n), events ? events_->used : 0});
  profile_.graph = StepProfile::Graph::Captured;
  StepGraphStats& st = graphs_->stats();
  if (st.captures++ == 0)
    log_info("CUDA graphs: first decode graph captured ({} tokens, {} requests, {} nodes)", meta.num_tokens(),
             meta.num_requests(), n);
  st.capture_ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return true;
}
#endif

namespace {
void check_rows(const std::vector<RowRequest>& rows, int64_t tokens) {
  DSA_CHECK(!rows.empty(), "model runner: a step must sample at least one row");
  for (const RowRequest& r : rows)
    DSA_CHECK(r.token >= 0 && r.token < tokens, "model runner: row token {} outside the batch of {}", r.token, tokens);
}
}  // namespace

StepResult ModelRunner::run(const kv::Batch& batch, const std::vector<RowRequest>& rows, const StepExtras* extras) {
  const auto t_start = std::chrono::steady_clock::now();
  check_rows(rows, batch.num_tokens());
  const bool draft = extras != nullptr && extras->draft;
  kv::BatchMetadata meta = draft ? kv_.draft_metadata(batch) : kv_.prepare(batch);
  // A decode-only step (one token per request) is padded to its batch bucket, so that batch sizes
  // between two buckets share one shape (and one CUDA graph). Not with extras: the MTP hand-over
  // buffers are sized by the real tokens.
  const int64_t R = meta.num_requests();
  if (pad_max_ > 0 && extras == nullptr && meta.num_tokens() == R && R <= pad_max_) {
    const int64_t bucket = kv::decode_batch_bucket(R, pad_max_);
    std::vector<RowRequest> padded = rows;
    for (int64_t i = 0; i < bucket - R; ++i) padded.push_back(RowRequest{R + i, {}, false});  // greedy, ignored
    kv::pad_metadata(meta, bucket - R);
    if (bucket > R) ++padded_steps_;
    return execute(meta, padded, static_cast<int64_t>(rows.size()), extras, t_start, /*bucket_want=*/true);
  }
  return execute(meta, rows, static_cast<int64_t>(rows.size()), extras, t_start, false);
}

// Tensor parallelism (tp_ranks.h): every rank runs the metadata rank 0's KV bookkeeping built,
// unpadded (TP steps run eagerly).
StepResult ModelRunner::run_prepared(kv::BatchMetadata meta, const std::vector<RowRequest>& rows,
                                     const StepExtras* extras) {
  const auto t_start = std::chrono::steady_clock::now();
  check_rows(rows, meta.num_tokens());
  return execute(meta, rows, static_cast<int64_t>(rows.size()), extras, t_start, false);
}

StepResult ModelRunner::execute(kv::BatchMetadata& meta, const std::vector<RowRequest>& rows, int64_t real_rows,
                                const StepExtras* extras, std::chrono::steady_clock::time_point t_start,
                                bool bucket_want) {
  const Device dev = lm_.device();
  const int64_t V = lm_.config().vocab_size;
  const auto N = static_cast<int64_t>(rows.size());
  const bool draft = extras != nullptr && extras->draft;
  Tensor hidden_rows = extras != nullptr ? extras->hidden_rows : Tensor();  // re-pointed to the device below

  // Host-side step inputs: the rows to compute, their sampling rules, the rows whose logits return.
  std::vector<int32_t> want;
  StepResult res;
  res.logits_row.assign(rows.size(), -1);
  for (size_t i = 0; i < rows.size(); ++i)
    if (rows[i].want_logits) {
      res.logits_row[i] = static_cast<int>(want.size());
      want.push_back(static_cast<int32_t>(i));
    }
  // A padded decode step also buckets the rows whose logits return (their count is part of the
  // shape): the extra ones repeat the last row and are not handed back.
  if (bucket_want && !want.empty()) {
    const int32_t last = want.back();
    want.resize(static_cast<size_t>(kv::decode_batch_bucket(static_cast<int64_t>(want.size()), pad_max_)), last);
  }
  Tensor logit_rows = Tensor::empty({N}, DType::I32);
  Tensor sampling = Tensor::empty({N * static_cast<int64_t>(sizeof(ops::SamplingRow))}, DType::U8);
  for (int64_t i = 0; i < N; ++i) {
    logit_rows.data<int32_t>()[i] = static_cast<int32_t>(rows[i].token);
    std::memcpy(sampling.data<uint8_t>() + i * sizeof(ops::SamplingRow), &rows[i].sampling, sizeof(ops::SamplingRow));
  }
  Tensor want_rows = Tensor::empty({static_cast<int64_t>(want.size())}, DType::I32);
  std::copy(want.begin(), want.end(), want_rows.data<int32_t>());

  std::vector<Tensor*> up = meta.tensors();
  up.push_back(&logit_rows);
  up.push_back(&sampling);
  up.push_back(&want_rows);
  up.push_back(&hidden_rows);
  const ShapeKey shape = shape_key(meta, up);
  if (shapes_.size() >= 4096) shapes_.clear();  // bounded bookkeeping (tests, logs)
  shapes_.insert(shape.words());
  if (dev.is_cuda()) {
    // One pinned mirror, one asynchronous copy; the tensors become views of the device twin.
    size_t total = 0;
    for (Tensor* t : up)
      if (t->defined()) total = align_up(total) + t->nbytes();
    up_->reserve(align_up(total), rows.size());
    char* host = static_cast<char*>(up_->host);
    size_t off = 0;
    std::vector<size_t> offsets;
    for (Tensor* t : up) {
      off = align_up(off);
      offsets.push_back(off);
      if (t->defined()) {
        std::memcpy(host + off, t->raw(), t->nbytes());
        off += t->nbytes();
      }
    }
    arena_->reset();  // every temporary of the previous step is gone (checked)
  }
  cuda_stream::StreamScope on_stream(stream());
  std::unique_ptr<cuda_memory::ArenaScope> arena;
  if (dev.is_cuda()) {
    size_t off = 0;
    for (Tensor* t : up) {
      off = align_up(off);
      if (t->defined()) {
        *t = Tensor::from_blob(static_cast<char*>(up_->device.raw()) + off, t->shape(), t->dtype(), dev);
        off += t->nbytes();
      }
    }
    cuda_memory::copy_async(up_->device.raw(), up_->host, off, cuda_memory::Dir::H2D);
    arena = std::make_unique<cuda_memory::ArenaScope>(*arena_);
  }

  model::StepInputs in;
  in.kv = &kv_;
  in.meta = &meta;
  in.logit_rows = logit_rows;
  if (extras != nullptr) {
    in.hidden_out = extras->hidden_out;
    in.hidden_src = extras->hidden_src;
    in.hidden_rows = hidden_rows;
  }
  Tensor logits = Tensor::empty({N, V}, DType::F32, dev);
  Tensor ids = Tensor::empty({N}, DType::I32, dev);
  Tensor wanted;
  if (!want.empty()) wanted = Tensor::empty({static_cast<int64_t>(want.size()), V}, DType::F32, dev);
  const std::function<void()> compute = [&] {
    if (draft)
      lm_.draft(in, logits);
    else
      lm_.forward(in, logits);
    ops::sample_tokens(logits, sampling, ids);
    if (wanted.defined()) ops::embed_rows(logits, want_rows, wanted);
  };
  const bool timed = profiling_ && dev.is_cuda();
  profile_ = StepProfile{};
#ifdef DSA_WITH_CUDA
  cudaStream_t s = DSA_CURRENT_STREAM;
  bool profiled = false;
  if (dev.is_cuda() && profile_decode_step() >= 0 && meta.num_tokens() == meta.num_requests()) {
    static int64_t decode_steps = 0;
    profiled = decode_steps++ == profile_decode_step();
    if (profiled) DSA_CUDA_CHECK(cudaProfilerStart());
  }
  if (timed) {
    if (!events_) events_ = std::make_unique<Events>();
    events_->used = 0;
    DSA_CUDA_CHECK(cudaEventRecord(events_->start, s));
    in.marker = events_.get();
  }
  // Which way the step runs (step_graphs.h): replay a graph of its shape, capture one, or eagerly.
  ShapeKey key;
  const StepGraphs::Graph* graph = nullptr;
  bool capture = false;
  if (dev.is_cuda() && graphs_ && meta.num_tokens() <= graphs_->max_tokens() && !trace_enabled()) {
    key = step_key(shape, up, timed, logits, ids, in, draft);
    graph = graphs_->find(key);
    capture = !graph && graphs_->seen(key);
  }
  if (graph) {
    count_nodes_ = false;
    DSA_CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph->exec), s));
    if (timed) events_->used = graph->markers;
    profile_.graph_nodes = graph->nodes;
    profile_.graph = StepProfile::Graph::Replayed;
    ++graphs_->stats().replays;
  } else if (capture || count_nodes_) {
    const bool count_only = !capture;
    count_nodes_ = false;
    if (count_only) in.marker = nullptr;  // profiling capture: no events inside, the graph is not kept
    if (!capture_step(compute, count_only ? nullptr : &key, timed && !count_only, meta)) {
      if (timed) {
        events_->used = 0;
        in.marker = events_.get();
      }
      compute();  // the step still runs, eagerly
    }
  } else {
    const uint64_t epoch = cuda_memory::memory_epoch();
    compute();
    if (graphs_ && !key.words().empty()) {
      ++graphs_->stats().eager;
      if (cuda_memory::memory_epoch() == epoch) graphs_->mark_seen(key);  // same memory after: replayable shape
    }
  }
  if (timed) DSA_CUDA_CHECK(cudaEventRecord(events_->end, s));
  if (profiled) DSA_CUDA_CHECK(cudaProfilerStop());
  if (!key.words().empty() && log_level() <= LogLevel::Debug) {
    // Why a step of a shape seen before found no graph: the words of its key that changed since
    // the last step with as many tokens.
    auto [it, first] = last_keys_.try_emplace(meta.num_tokens(), key);
    if (!first && profile_.graph != StepProfile::Graph::Replayed) {
      const std::string d = key.diff(it->second);
      log_debug("step: {} tokens: no graph replayed; key vs the last {}-token step: {}", meta.num_tokens(),
                meta.num_tokens(), d.empty() ? "equal (first capture of this key)" : d);
    }
    it->second = key;
  }
  if (dev.is_cuda())
    log_debug("step: {} tokens, {} requests: {} (memory epoch {}, arena {:.1f} of {:.1f} MiB, {} overflows so far{})",
              meta.num_tokens(), meta.num_requests(),
              profile_.graph == StepProfile::Graph::Replayed   ? "graph replayed"
              : profile_.graph == StepProfile::Graph::Captured ? "graph captured"
                                                               : "eager",
              cuda_memory::memory_epoch(), arena_->used() / 1048576.0, arena_->capacity() / 1048576.0,
              arena_->overflows(), profile_.capture_error.empty() ? "" : ", capture dropped: " + profile_.capture_error);
#else
  compute();
#endif
  profile_.host_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_start).count();

  res.tokens.resize(rows.size());
  if (dev.is_cuda()) {
    // The step's one wait: the sampled ids.
    cuda_memory::copy(up_->ids, ids.raw(), static_cast<size_t>(N) * sizeof(int32_t), cuda_memory::Dir::D2H);
    std::copy(up_->ids, up_->ids + N, res.tokens.begin());
    if (wanted.defined()) res.logits = wanted.to(Device::cpu());
#ifdef DSA_WITH_CUDA
    if (timed) {  // the events are complete: the copy above waited for the stream
      float ms = 0;
      DSA_CUDA_CHECK(cudaEventElapsedTime(&ms, events_->start, events_->end));
      profile_.device_ms = ms;
      for (int i = 0; i < events_->used; ++i) {
        DSA_CUDA_CHECK(cudaEventElapsedTime(&ms, events_->start, events_->points[static_cast<size_t>(i)]));
        profile_.points_ms.push_back(ms);
      }
    }
#endif
  } else {
    std::copy(ids.data<int32_t>(), ids.data<int32_t>() + N, res.tokens.begin());
    if (wanted.defined()) res.logits = wanted;
  }
  // Padding rows' tokens are dropped (they want no logits; `logits` may hold repeated rows past
  // the real ones, which no logits_row names).
  res.tokens.resize(static_cast<size_t>(real_rows));
  res.logits_row.resize(static_cast<size_t>(real_rows));
  // Rows the device sampler could not finish (top_p wider than its sorted candidates): on the host.
  for (int64_t i = 0; i < real_rows; ++i) {
    if (res.tokens[i] != -2) continue;
    Tensor row = logits.slice(0, i, i + 1).to(Device::cpu());
    res.tokens[i] = ops::sample_row(row.data<float>(), V, rows[i].sampling);
  }
  if (profiling_) {
    profile_.wall_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_start).count();
    profile_.tokens = meta.num_tokens();
    profile_.draft = draft;
    if (profile_log_.size() >= 4096) profile_log_.erase(profile_log_.begin());
    profile_log_.push_back(profile_);
  }
  return res;
}

}  // namespace dsa::engine

namespace dsa::engine {

GraphCaptureReport ModelRunner::capture_decode_graphs() {
  GraphCaptureReport rep;
#ifdef DSA_WITH_CUDA
  if (!graphs_ || pad_max_ <= 0 || !lm_.device().is_cuda()) return rep;
  const auto t0 = std::chrono::steady_clock::now();
  const auto since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
  };
  const int device = lm_.device().index;
  // Free device memory; the caching allocator's blocks count as used, so a step that takes and
  // gives back memory shows what it keeps cached, and a graph what its instantiation takes.
  const auto free_bytes = [device]() -> int64_t {
    size_t f = 0, t = 0;
    if (cudaSetDevice(device) != cudaSuccess || cudaMemGetInfo(&f, &t) != cudaSuccess) {
      cudaGetLastError();
      return -1;
    }
    return static_cast<int64_t>(f);
  };
  const int64_t free0 = free_bytes();
  const kv::KvManagerOptions& ko = kv_.options();
  const int64_t R = std::max<int64_t>(ko.max_requests, pad_max_), T = std::max<int64_t>(ko.max_step_tokens, R);
  const int64_t index_len = kv::index_len_bucket(1);
  rep.index_len = index_len;

  // The upload twin at the size of the largest step the limits allow: a later step never
  // reallocates it (its address is in every key).
  if (ko.max_position > 0) {
    const auto bytes = [](kv::BatchMetadata m) {
      size_t b = 0;
      for (Tensor* t : m.tensors())
        if (t->defined()) b = align_up(b) + t->nbytes();
      return b;
    };
    const size_t widest = bytes(kv_.padding_metadata(R, kv::index_len_bucket(ko.max_position)));
    const size_t per_token = (bytes(kv_.padding_metadata(17, 0)) - bytes(kv_.padding_metadata(1, 0)) + 15) / 16;
    const auto rows = static_cast<size_t>(T + R);  // at most a row per token plus one per request
    const size_t row_bytes = rows * (2 * sizeof(int32_t) + sizeof(ops::SamplingRow)) + static_cast<size_t>(T) * 4;
    up_->reserve(align_up(widest + static_cast<size_t>(T - R) * per_token + row_bytes + 64 * kAlign), rows);
  }
  // One eager step of T padding tokens: the arena and the workspaces (MoE) grow to what a step of
  // max_step_tokens short-context tokens needs before anything is captured.
  {
    kv::BatchMetadata m = kv_.padding_metadata(T, index_len);
    execute(m, {RowRequest{0, {}, false}}, 0, nullptr, std::chrono::steady_clock::now(), false);
  }

  std::vector<int64_t> sizes{pad_max_};
  for (auto b = static_cast<int64_t>(std::bit_floor(static_cast<uint64_t>(pad_max_))); b >= 1; b /= 2)
    if (b < pad_max_) sizes.push_back(b);
  // Largest first: a smaller bucket then finds the arena and workspaces grown. If memory still
  // moved after the first capture, the graphs before are unreachable: one more pass.
  for (int pass = 0; pass < 2; ++pass) {
    rep.buckets.clear();
    uint64_t epoch = 0;
    for (size_t i = 0; i < sizes.size(); ++i) {
      GraphCaptureReport::Bucket bk;
      bk.batch = sizes[i];
      const int64_t f0 = free_bytes();
      const auto tb = std::chrono::steady_clock::now();
      std::vector<RowRequest> rows(static_cast<size_t>(bk.batch));
      for (int64_t j = 0; j < bk.batch; ++j) rows[static_cast<size_t>(j)].token = j;
      // First sight runs eagerly (and is not marked seen when memory moved during it), the next captures.
      for (int attempt = 0; attempt < 5; ++attempt) {
        kv::BatchMetadata m = kv_.padding_metadata(bk.batch, index_len);
        execute(m, rows, 0, nullptr, std::chrono::steady_clock::now(), true);
        if (profile_.graph != StepProfile::Graph::None) {
          bk.nodes = profile_.graph_nodes;
          bk.error.clear();
          break;
        }
        if (!profile_.capture_error.empty()) bk.error = profile_.capture_error;
      }
      if (bk.nodes < 0 && bk.error.empty()) bk.error = "not captured after 5 steps";
      const int64_t f1 = free_bytes();
      if (f0 >= 0 && f1 >= 0) bk.bytes = f0 - f1;
      bk.ms = since(tb);
      if (i == 0) epoch = cuda_memory::memory_epoch();
      if (bk.nodes >= 0)
        log_info("CUDA graphs: decode batch {:>4}: {} nodes, {:.1f} MiB, {:.1f} ms", bk.batch, bk.nodes,
                 static_cast<double>(bk.bytes) / (1 << 20), bk.ms);
      else
        log_warn("CUDA graphs: decode batch {} not captured: {}", bk.batch, bk.error);
      rep.buckets.push_back(bk);
    }
    rep.memory_moved = cuda_memory::memory_epoch() != epoch;
    if (!rep.memory_moved) break;
    log_warn("CUDA graphs: device memory moved during the start-up capture (a workspace grew for a smaller batch){}",
             pass == 0 ? ": capturing again" : ": the graphs before it are captured again when their steps come");
  }
  const int64_t free1 = free_bytes();
  if (free0 >= 0 && free1 >= 0) rep.bytes = free0 - free1;
  rep.ms = since(t0);
  int64_t captured = 0;
  for (const auto& b : rep.buckets) captured += b.nodes >= 0;
  log_info("CUDA graphs: {} of {} decode batch buckets (1..{}) captured at start-up for contexts up to {} tokens in "
           "{:.0f} ms, {:.1f} MiB; longer contexts and other steps up to {} tokens are captured on their second step",
           captured, rep.buckets.size(), pad_max_, index_len, rep.ms, static_cast<double>(rep.bytes) / (1 << 20),
           graphs_->max_tokens());
#endif
  return rep;
}

}  // namespace dsa::engine
