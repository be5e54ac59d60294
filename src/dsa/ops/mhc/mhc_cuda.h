// Launchers of the CUDA mHC kernels (mhc.cu). Only used when DSA_WITH_CUDA.
#pragma once
#include <cstdint>

#include "dsa/core/dtype.h"

namespace dsa::ops::cuda {

struct MhcPreArgs {
  const void* X;  // [T][hc][d]
  DType x_dtype;
  const float* fn;     // [n_mix][hc*d]
  const float* base;   // [n_mix]
  const float* scale;  // [3] (head: [1])
  float* mix;          // [T][n_mix]
  void* y;             // [T][d]
  DType y_dtype;
  float* post;  // [T][hc] (null for the head)
  float* comb;  // [T][hc][hc] (null for the head)
  int64_t tokens, d;
  int hc, n_mix, iters;
  float hc_eps, norm_eps;
  bool head;  // true: final hyper-head (pre only, no Sinkhorn)
};

struct MhcPostArgs {
  const void* f;  // [T][d]
  DType f_dtype;
  const void* X;  // [T][hc][d]
  DType x_dtype;
  const float* post;  // [T][hc]
  const float* comb;  // [T][hc][hc]
  void* out;          // [T][hc][d]
  DType out_dtype;
  int64_t tokens, d;
  int hc;
};

void mhc_pre(const MhcPreArgs& a);
void mhc_post(const MhcPostArgs& a);

}  // namespace dsa::ops::cuda
