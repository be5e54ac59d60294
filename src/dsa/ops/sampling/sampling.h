// Token sampling over rows of logits, on the device that holds them (the engine samples on the
// GPU so that only token ids come back to the host).
//
// Per row (SamplingRow):
//   - a row holding NaN or +inf, or only -inf, gives -1 (the caller reports a non-finite logit);
//   - temperature == 0: greedy, the largest logit, lowest id on ties;
//   - otherwise the candidates are the top_k largest logits (0 = all; ties -> lower id first),
//     then, when min_p > 0, those whose softmax(logit / temperature) probability is at least
//     min_p times the largest one, then, when top_p < 1, the shortest prefix of the candidates sorted by logit (ties -> lower
//     id) whose softmax(logit / temperature) mass, normalised over the candidates, reaches top_p;
//     the token is the candidate maximising logit / temperature + g(id), g = -log(-log(u)) with
//     u in (0, 1) drawn from Philox4x32-10 keyed by `seed` at counter (id, `counter`): the
//     Gumbel-max form of drawing from softmax(logit / temperature) over the kept candidates.
//     `counter` is the position the new token takes in its sequence, so a request's draws
//     depend only on its seed, its logits and its position: never on which other requests share
//     the batch, nor on the batch order.
// The CPU reference (sample_row) and the CUDA kernel agree exactly except where two candidates'
// keys are within float rounding of each other (the kernel sums in float in a fixed tree order,
// the reference in double) and, on CUDA, top_p over more than 2048 candidates whose nucleus is
// wider than the 2048 largest, and min_p > 0: such a row gives -2 and the caller samples it
// with sample_row.
#pragma once
#include <cstdint>

#include "dsa/core/tensor.h"
#include "dsa/ops/sampling/sampling_row.h"

namespace dsa::ops {

// logits f32 [N][V] contiguous; rows u8 [N * 32] (SamplingRow bytes) on the same device; out i32 [N].
void sample_tokens(const Tensor& logits, const Tensor& rows, const Tensor& out);

// The CPU reference for one row.
int32_t sample_row(const float* logits, int64_t vocab, const SamplingRow& row);

// The distribution sample_row draws from (speculative decoding's rejection rule needs the
// probabilities, not only a draw): probs[0..vocab) = softmax(logit / temperature) over the
// row's candidates (top_k, min_p, top_p as above), 0 elsewhere; temperature 0: 1 at the argmax.
// False (probs untouched) when sample_row would give -1 (NaN, +inf, or only -inf).
bool sampling_probs(const float* logits, int64_t vocab, const SamplingRow& row, float* probs);

// The Gumbel noise of (seed, counter, id) (host; the kernel computes the same draw).
float sampling_gumbel(uint64_t seed, uint64_t counter, int64_t id);

}  // namespace dsa::ops
