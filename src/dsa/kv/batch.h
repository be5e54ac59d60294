// Batch: the tokens of one engine step, flat and ragged. Every token names its request and its
// position in that request; a decode step of several requests, a prefill chunk, or both mixed,
// are all the same shape. A single-prompt `generate` is a batch of one request.
//
// Rules (Batch::validate):
// - the tokens of one request form one contiguous run (a segment) in the flat order, and their
//   positions are consecutive and ascending: start, start + 1, ..., start + n - 1;
// - a request appears in at most one segment;
// - positions are >= 0 and below the limits (max_position, and < 2^31 since the metadata
//   tensors hold int32 positions); token ids (when given) are in [0, vocab_size).
// Whether `start` continues what the KV cache already holds is checked by KvManager::prepare.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "dsa/kv/request_id.h"

namespace dsa::kv {

struct BatchLimits {
  int64_t max_tokens = 0;    // tokens per step; 0 = no limit
  int max_requests = 0;      // requests per step; 0 = no limit
  int64_t max_position = 0;  // positions must be < max_position (model context); 0 = only < 2^31
  int vocab_size = 0;        // token ids must be in [0, vocab_size); 0 = not checked
};

struct Batch {
  std::vector<RequestId> request;  // [T] request of each token
  std::vector<int64_t> position;   // [T] position of each token in its request
  std::vector<int32_t> token;      // [T] input token ids, or empty (KV-only users such as tests)

  // A run of tokens of one request: flat tokens [first, first + count) at positions
  // [start, start + count).
  struct Segment {
    RequestId id = 0;
    int64_t first = 0;
    int64_t count = 0;
    int64_t start = 0;
    int64_t end() const { return start + count; }  // the request's length after this step
  };

  // Appends a segment of `tokens.size()` tokens of request `id` at positions start, start + 1, ...
  void add(RequestId id, int64_t start, std::span<const int32_t> tokens);
  // Appends `count` tokens without ids (only valid while no segment carries ids).
  void add_positions(RequestId id, int64_t start, int64_t count);

  int64_t num_tokens() const { return static_cast<int64_t>(request.size()); }
  bool empty() const { return request.empty(); }

  // Throws dsa::Error naming the token, request and value that break a rule above.
  void validate(const BatchLimits& limits = {}) const;
  // The segments in flat order; validates first.
  std::vector<Segment> segments(const BatchLimits& limits = {}) const;
};

}  // namespace dsa::kv
