// A small GLM-form sparse-MLA problem shared by the attention and tuning tests: T tokens, H heads,
// an fp8_ds_mla cache of 2 pages of 64 filled through the formats insert op, 64 indices per token
// with -1 and out-of-range entries, and the CPU reference output.
#pragma once
#include "common/testing.h"
#include "dsa/ops/sparse_mla/sparse_mla.h"

namespace dsa::test {

struct SparseMlaProblem {
  ops::SparseMlaParams p;  // host tensors; p.o and p.lse poisoned
  Tensor o_ref, lse_ref;   // sparse_mla_reference on the same inputs
};
SparseMlaProblem make_glm_sparse_mla_problem(int T, int H, Rng& rng);

// p with its inputs copied to cuda:0 and fresh poisoned outputs there.
ops::SparseMlaParams sparse_mla_on_cuda(const ops::SparseMlaParams& p);

// The run's o within 2e-2 (+2e-2 relative) and lse within 1e-3 (+1e-3 relative) of the
// reference, -inf lse exactly, no NaN (gtest assertions; `run` may be on either device).
void expect_matches_sparse_mla_reference(const ops::SparseMlaParams& run, const SparseMlaProblem& pr);

}  // namespace dsa::test
