// TunableOp: the interface between a kernel family that has several ways to compute the same
// result ("tactics": split counts, tile shapes, ...) and the tuner, the tuning cache and the
// warm-up plan. Tuning changes speed only, never results: every tactic must produce the
// reference output within the op's tolerance (tactic_check.h helps tests show that).
//
// Shapes: an op has dynamic dimensions (dims), the first of which is always the token count
// of the batch. Token counts are bucketed by the tuner (1, 2, 4, ... clamped to the engine's
// max batched tokens, bucket.h); the op buckets its other dims itself (bucket_dim). Everything
// static (heads, head dim, cache format) belongs in instance_key().
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "dsa/core/tensor.h"

namespace dsa::tune {

// Tactic id -1 is the default: it must always work, for every shape the op accepts.
inline constexpr int kDefaultTactic = -1;

struct Tactic {
  int id = kDefaultTactic;
  std::string description;  // readable, e.g. "splits=4" (stored in the cache next to the id)
};

using Dims = std::vector<int64_t>;  // values of an op's dynamic dims, dims[0] = tokens

class TunableOp {
 public:
  virtual ~TunableOp() = default;

  // Kernel family, e.g. "sparse_mla_decode". Groups entries in the cache file.
  virtual std::string name() const = 0;
  // Static configuration of this instance, e.g. "h64.dqk576.topk2048.fp8_ds_mla"; "" if none.
  virtual std::string instance_key() const { return ""; }
  // Changes whenever the family's tactic set or the meaning of a tactic id changes (e.g.
  // "splits:1,2,4,8,16;v2"): cached entries under another signature are ignored.
  virtual std::string signature() const = 0;
  // Names of the dynamic dims; the first must be "tokens".
  virtual std::vector<std::string> dim_names() const { return {"tokens"}; }
  // Bucket for dynamic dim i >= 1 (dim 0 is bucketed by the tuner). Default: next power of two.
  virtual int64_t bucket_dim(size_t i, int64_t value) const;
  // Bucket values of dims 1.. that an engine can hit (one list per dim); the warm-up plan
  // takes their cross product with the token buckets. Default: no other dims.
  virtual std::vector<std::vector<int64_t>> other_dim_buckets() const { return {}; }

  // Tactics valid for `dims` (already bucketed). The tuner adds the default when missing.
  virtual std::vector<Tactic> tactics(const Dims& dims) const = 0;
  // Where the op runs: CPU ops are timed with a steady clock, CUDA ops with CUDA events on
  // stream().
  virtual Device device() const { return Device::cpu(); }
  virtual void* stream() const { return nullptr; }  // cudaStream_t; nullptr = default stream

  // Allocates and fills inputs/outputs for `dims` (called once per bucket, before run).
  virtual void prepare(const Dims& dims) = 0;
  // Runs `tactic` on the prepared inputs (asynchronously for CUDA ops). Throws dsa::Error when
  // the tactic cannot run this shape.
  virtual void run(int tactic, const Dims& dims) = 0;
  // Frees what prepare() allocated.
  virtual void release() {}

  // Non-virtual helpers.
  Dims bucket(const Dims& dims, int64_t max_tokens) const;  // tokens and other dims bucketed
  // Cache key: "<instance>|tokens=4,keys=2048", or "tokens=4,keys=2048" without an instance key.
  std::string key(const Dims& bucketed) const;
};

}  // namespace dsa::tune
