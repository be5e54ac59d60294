// The rejection-sampling rule of speculative decoding (Leviathan et al. 2023, Chen et al. 2023;
// docs/speculative-decoding.md) for sampled requests: drafts are drawn from the draft model's
// processed distribution q; the target's processed distribution p accepts draft d with
// probability min(1, p(d) / q(d)), and the first rejected position takes a token drawn from
// norm(max(0, p - q)). Each emitted token is then distributed exactly as p (whatever q is).
// Every random number is a Philox draw of the request's seed at the position of the token it
// decides, so a seeded request gives the same tokens on every run.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace dsa::engine {

// The draws of the rule. Philox ids below 2^63 are the sampler's Gumbel noise (one per vocabulary
// id, ops/sampling), so these never coincide with the target's own draws at the same position.
enum class SpecDraw : uint64_t { Draft = 0, Accept = 1, Residual = 2 };

// A uniform in (0, 1) for the token at position `counter` of a request seeded `seed`.
float spec_uniform(uint64_t seed, uint64_t counter, SpecDraw what);

// Inverse CDF over ids in ascending order: the first id whose cumulative probability exceeds
// u * sum(probs) (accumulated in double), the last positive id when rounding leaves none;
// -1 when nothing is positive.
int32_t draw_from(std::span<const float> probs, float u);

struct RejectionVerdict {
  bool accepted = false;
  int32_t token = -1;  // the draft when accepted, else the residual's draw (-1: p is all zero)
};

// One drafted position: p and q over the vocabulary (each summing to 1), `draft` drawn from q.
// Accepted when u_accept * q(draft) < p(draft) (probability min(1, p / q); a draft q gives
// probability 0, e.g. one forced by a test, is accepted whenever p(draft) > 0). Rejected: the
// token is draw_from(max(0, p - q), u_residual), or draw_from(p) when that is all zero (only
// float rounding of p == q rejects then).
RejectionVerdict rejection_verdict(std::span<const float> p, std::span<const float> q, int32_t draft, float u_accept,
                                   float u_residual);

}  // namespace dsa::engine
