// Random sparse-MLA problems for the tests (the sparse-MLA, attention and tuning tests share them):
// caches of ops/sparse_mla/random_cache.h (the generator the benchmarks and the tuner use too) with
// the exact dequantized value of every slot, on scattered pages of several requests, and index
// lists with -1 entries, duplicates, out-of-range slots and partial lengths.
#pragma once
#include <cstdint>
#include <vector>

#include "common/testing.h"
#include "dsa/core/device.h"
#include "dsa/ops/sparse_mla/sparse_mla.h"

namespace dsa::test {

struct CacheData {
  ops::PagedKvCache cache;  // host bytes
  std::vector<float> truth;  // [num_slots][d_qk] exact dequantized values
  int requests = 0;
  int ctx = 0;                              // tokens per request
  std::vector<std::vector<int32_t>> table;  // [request][block] -> page
  int32_t slot_of(int req, int pos) const {
    return table[req][pos / cache.page_size] * cache.page_size + pos % cache.page_size;
  }
};

// Fills a cache of `requests` x `ctx` tokens on randomly permuted pages (plus spare pages).
// pow2_scales: fp8_ds_mla scales are powers of two (MODEL1 always is); else arbitrary fp32.
CacheData make_cache(formats::KvFormat kind, int page_size, int requests, int ctx, bool pow2_scales, Rng& rng);

struct Form {
  formats::KvFormat kind = formats::KvFormat::DsMla;
  int H = 64;
  int64_t T = 1;
  int main_page = 64, main_k = 128;
  bool extra = false;
  int extra_page = 64, extra_k = 128;
  bool sink = false;
  bool pow2 = true;       // power-of-two scales (fp8_ds_mla)
  bool awkward = true;    // -1, duplicates, out-of-range, partial and empty rows
};

struct Problem {
  Form form;
  CacheData main, extra;
  Tensor q, main_idx, main_len, extra_idx, extra_len, sink;  // host tensors
  float scale = 0.f;
  // Params on `dev` (inputs copied there), writing to o/lse (which must live on dev).
  ops::SparseMlaParams params(Device dev, Tensor o, Tensor lse) const;
};
Problem make_problem(const Form& f, Rng& rng);

// Brute force from the truth arrays in double (independent of the reference's byte decoding).
// o_abs (optional): sum_j w_j |v_j[d]| with the final softmax weights w (sink included), the
// natural scale of rounding errors in o: a kernel that rounds each weight (bf16 P) or each V
// value (bf16 K/V for arbitrary scales) by a relative e errs by at most e * o_abs.
// s_abs (optional): per (token, head) max_j softmax_scale * sum_d |q_d k_j[d]|, the scale of
// score errors when K is rounded (bf16 unit roundoff 2^-8 => |d lse| <= 2^-8 * s_abs).
void brute_force(const Problem& p, std::vector<double>& o, std::vector<double>& lse,
                 std::vector<double>* o_abs = nullptr, std::vector<double>* s_abs = nullptr);

// Compares o (bf16) / lse (f32) against expected values; o tolerance atol + rtol*|ref|
// (+ abs_rtol * o_abs[i] when o_abs is given).
// Reports the first mismatches; NaN never passes; -inf lse must match exactly.
::testing::AssertionResult close_to(const Tensor& o, const Tensor& lse, const std::vector<double>& o_ref,
                                    const std::vector<double>& lse_ref, double o_atol, double o_rtol, double lse_atol,
                                    const std::vector<double>* o_abs = nullptr, double abs_rtol = 0.0,
                                    const std::vector<double>* s_abs = nullptr, double s_rtol = 0.0);
std::vector<double> to_double(const Tensor& t);  // bf16 / f32 host tensor -> double

// A small GLM-form problem for the attention and tuning tests: T tokens, H heads, an fp8_ds_mla
// cache in pages of 64, 64 awkward indices per token (make_problem's), and the CPU reference.
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
