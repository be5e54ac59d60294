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
  void* y;             // [T][d]; may be null when norm_w/yn are set (y is then only rounded to y_dtype)
  DType y_dtype;
  float* post;  // [T][hc] (null for the head)
  float* comb;  // [T][hc][hc] (null for the head)
  float* part;  // scratch [T][n_mix + 1][splits] (mhc_mix_splits; allocated by the caller)
  int64_t tokens, d;
  int hc, n_mix, iters, splits;
  float hc_eps, norm_eps;
  bool head;  // true: final hyper-head (pre only, no Sinkhorn)
  // Fused RMSNorm of y (mhc_pre_norm): yn = round(y) * rsqrt(mean(round(y)^2) + rms_eps) * norm_w.
  // yn null: no norm (plain mhc_pre / mhc_head).
  const void* norm_w = nullptr;  // [d]
  DType norm_w_dtype = DType::F32;
  void* yn = nullptr;  // [T][d]
  DType yn_dtype = DType::F32;
  float rms_eps = 0.f;
};

// Split-K factor of the mix dot products for T tokens, n_mix logits over n = hc*d inputs, and
// the largest d the fused norm takes (longer rows: mhc_pre then rms_norm).
int mhc_mix_splits(int64_t tokens, int n_mix, int64_t n);
constexpr int64_t kMhcNormMaxD = 8192;

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

// The post of the sub-layer before a fused mhc_post_pre (hc = 4): X (MhcPreArgs::X, written in
// place) <- post * f + comb^T X, then the pre of MhcPreArgs over the new X.
struct MhcPostIn {
  const void* f;  // [T][d]
  DType f_dtype;
  const float* post;  // [T][hc]
  const float* comb;  // [T][hc][hc]
  void* X;            // == MhcPreArgs::X
};

// Slices of the fused post + mix kernel for hidden size d (the same at every T: one column per
// thread and pass, T x slices CTAs).
int mhc_post_mix_splits(int64_t d);

void mhc_pre(const MhcPreArgs& a);
void mhc_post(const MhcPostArgs& a);
// a.splits from mhc_post_mix_splits; a.hc == 4.
void mhc_post_pre(const MhcPostIn& in, const MhcPreArgs& a);

}  // namespace dsa::ops::cuda
