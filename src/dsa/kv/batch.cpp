#include "dsa/kv/batch.h"

#include <limits>
#include <unordered_set>

#include "dsa/core/error.h"

namespace dsa::kv {

void Batch::add(RequestId id, int64_t start, std::span<const int32_t> tokens) {
  DSA_CHECK(token.size() == request.size(), "Batch::add: the batch already holds {} tokens without ids",
            request.size() - token.size());
  for (size_t i = 0; i < tokens.size(); ++i) {
    request.push_back(id);
    position.push_back(start + static_cast<int64_t>(i));
    token.push_back(tokens[i]);
  }
}

void Batch::add_positions(RequestId id, int64_t start, int64_t count) {
  DSA_CHECK(token.empty(), "Batch::add_positions: the batch already carries token ids");
  DSA_CHECK(count >= 0, "Batch::add_positions: count = {} (must be >= 0)", count);
  for (int64_t i = 0; i < count; ++i) {
    request.push_back(id);
    position.push_back(start + i);
  }
}

void Batch::validate(const BatchLimits& limits) const { (void)segments(limits); }

std::vector<Batch::Segment> Batch::segments(const BatchLimits& lim) const {
  const int64_t T = num_tokens();
  DSA_CHECK(position.size() == request.size(), "batch: {} positions for {} tokens", position.size(), request.size());
  DSA_CHECK(token.empty() || token.size() == request.size(), "batch: {} token ids for {} tokens (give one per token or none)",
            token.size(), request.size());
  DSA_CHECK(lim.max_tokens <= 0 || T <= lim.max_tokens, "batch: {} tokens exceed max_tokens = {}", T, lim.max_tokens);
  const int64_t pos_limit = lim.max_position > 0 ? lim.max_position : std::numeric_limits<int32_t>::max();

  std::vector<Segment> segs;
  std::unordered_set<RequestId> seen;
  for (int64_t t = 0; t < T; ++t) {
    const RequestId id = request[t];
    const int64_t p = position[t];
    DSA_CHECK(p >= 0 && p < pos_limit, "batch: token {} (request {}) has position {} (must be in [0, {}))", t, id, p,
              pos_limit);
    if (!token.empty())
      DSA_CHECK(token[t] >= 0 && (lim.vocab_size <= 0 || token[t] < lim.vocab_size),
                "batch: token {} (request {}) has id {} (must be in [0, {}))", t, id, token[t], lim.vocab_size);
    if (!segs.empty() && segs.back().id == id) {
      Segment& s = segs.back();
      DSA_CHECK(p == s.end(), "batch: token {} of request {} has position {} but the request's previous token is at {} "
                "(positions of a request must be consecutive)", t, id, p, s.end() - 1);
      ++s.count;
      continue;
    }
    DSA_CHECK(seen.insert(id).second,
              "batch: request {} appears again at token {} (the tokens of a request must be contiguous)", id, t);
    segs.push_back(Segment{id, t, 1, p});
  }
  DSA_CHECK(lim.max_requests <= 0 || static_cast<int64_t>(segs.size()) <= lim.max_requests,
            "batch: {} requests exceed max_requests = {}", segs.size(), lim.max_requests);
  return segs;
}

}  // namespace dsa::kv
