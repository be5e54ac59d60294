#include "dsa/engine/model_runner.h"

#include <algorithm>
#include <cstring>

#include <chrono>

#include "dsa/core/error.h"
#ifdef DSA_WITH_CUDA
#include <cuda_runtime.h>

#include "dsa/core/cuda_check.h"
#endif
#include "dsa/ops/sampling/sampling.h"
#include "dsa/ops/tensor/tensor_ops.h"

namespace dsa::engine {

namespace {

constexpr size_t kAlign = 16;
size_t align_up(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
constexpr size_t kInitialArena = 64u << 20;  // grows to the largest step's need

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
    DSA_CUDA_CHECK(cudaEventRecord(points[static_cast<size_t>(point)], DSA_CURRENT_STREAM));
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
  }
}

ModelRunner::~ModelRunner() = default;

StepResult ModelRunner::run(const kv::Batch& batch, const std::vector<RowRequest>& rows, const StepExtras* extras) {
  const auto t_start = std::chrono::steady_clock::now();
  const Device dev = lm_.device();
  const int64_t V = lm_.config().vocab_size;
  const auto N = static_cast<int64_t>(rows.size());
  DSA_CHECK(N > 0, "model runner: a step must sample at least one row");
  for (const RowRequest& r : rows)
    DSA_CHECK(r.token >= 0 && r.token < batch.num_tokens(), "model runner: row token {} outside the batch of {}",
              r.token, batch.num_tokens());
  const bool draft = extras != nullptr && extras->draft;
  kv::BatchMetadata meta = draft ? kv_.draft_metadata(batch) : kv_.prepare(batch);
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
  auto compute = [&] {
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
  if (timed) {
    if (!events_) events_ = std::make_unique<Events>();
    events_->used = 0;
    DSA_CUDA_CHECK(cudaEventRecord(events_->start, DSA_CURRENT_STREAM));
    in.marker = events_.get();
  }
  if (count_nodes_ && dev.is_cuda()) {
    count_nodes_ = false;
    in.marker = nullptr;  // no events inside the capture
    cudaStream_t s = DSA_CURRENT_STREAM;
    DSA_CUDA_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed));
    std::string err;
    try {
      compute();
    } catch (const std::exception& e) {
      err = e.what();
    }
    cudaGraph_t graph = nullptr;
    const cudaError_t ec = cudaStreamEndCapture(s, &graph);
    if (err.empty() && ec != cudaSuccess) err = cudaGetErrorString(ec);
    cudaGetLastError();
    if (err.empty()) {
      size_t n = 0;
      DSA_CUDA_CHECK(cudaGraphGetNodes(graph, nullptr, &n));
      profile_.graph_nodes = static_cast<int64_t>(n);
      cudaGraphExec_t exec = nullptr;
      DSA_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
      DSA_CUDA_CHECK(cudaGraphLaunch(exec, s));
      DSA_CUDA_CHECK(cudaStreamSynchronize(s));  // profiling only: the exec is destroyed next
      cudaGraphExecDestroy(exec);
    } else {
      profile_.capture_error = err;
    }
    if (graph) cudaGraphDestroy(graph);
    if (!err.empty()) compute();  // the step still runs, eagerly
  } else {
    compute();
  }
  if (timed) DSA_CUDA_CHECK(cudaEventRecord(events_->end, DSA_CURRENT_STREAM));
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
  // Rows the device sampler could not finish (top_p wider than its sorted candidates): on the host.
  for (int64_t i = 0; i < N; ++i) {
    if (res.tokens[i] != -2) continue;
    Tensor row = logits.slice(0, i, i + 1).to(Device::cpu());
    res.tokens[i] = ops::sample_row(row.data<float>(), V, rows[i].sampling);
  }
  return res;
}

}  // namespace dsa::engine
