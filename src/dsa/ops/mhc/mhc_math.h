// mHC coefficient math shared by the CPU reference and the CUDA kernels (host + device, float).
// From the normalised mix logits of one token (mix = (fn . x) * rsqrt(mean(x^2) + norm_eps),
// length (2 + hc) * hc) it computes
//   pre[i]  = sigmoid(scale0 * mix[i] + base[i]) + hc_eps
//   post[i] = 2 * sigmoid(scale1 * mix[hc + i] + base[hc + i])
//   comb    = softmax over each row of (scale2 * mix[2hc + i*hc + j] + base[2hc + i*hc + j]) + hc_eps,
//             then comb /= (column sums + hc_eps), then (iters - 1) times: rows /= (row sums + hc_eps),
//             columns /= (column sums + hc_eps).
// With iters = 20 this is the "softmax rows + 19 more row/column normalisations" of docs/model-reference.md
// §2: exactly transformers' DeepseekV4HyperConnection.forward and DeepSeek's
// hc_split_sinkhorn (one column normalisation first, then iters-1 row+column pairs).
// comb[i][j] (row i, column j) weights input stream i into output stream j (see mhc.h).
#pragma once
#include <cmath>

#include "dsa/core/dtype_conv.h"  // DSA_HD

namespace dsa::ops {

constexpr int kMhcMaxHc = 8;

DSA_HD float mhc_sigmoid(float z) { return 1.0f / (1.0f + expf(-z)); }

// comb[i][*] /= (row sum + eps) and comb[*][j] /= (column sum + eps), on a row-major hc x hc matrix.
DSA_HD void mhc_row_norm(float* comb, int hc, float eps) {
  for (int i = 0; i < hc; ++i) {
    float s = 0.0f;
    for (int j = 0; j < hc; ++j) s += comb[i * hc + j];
    for (int j = 0; j < hc; ++j) comb[i * hc + j] /= (s + eps);
  }
}
DSA_HD void mhc_col_norm(float* comb, int hc, float eps) {
  for (int j = 0; j < hc; ++j) {
    float s = 0.0f;
    for (int i = 0; i < hc; ++i) s += comb[i * hc + j];
    for (int i = 0; i < hc; ++i) comb[i * hc + j] /= (s + eps);
  }
}

DSA_HD void mhc_split_sinkhorn(const float* mix, const float* scale, const float* base, int hc, int iters,
                               float hc_eps, float* pre, float* post, float* comb) {
  for (int i = 0; i < hc; ++i) {
    pre[i] = mhc_sigmoid(mix[i] * scale[0] + base[i]) + hc_eps;
    post[i] = 2.0f * mhc_sigmoid(mix[hc + i] * scale[1] + base[hc + i]);
  }
  for (int i = 0; i < hc; ++i) {
    float* row = comb + i * hc;
    float m = -INFINITY;
    for (int j = 0; j < hc; ++j) {
      row[j] = mix[2 * hc + i * hc + j] * scale[2] + base[2 * hc + i * hc + j];
      m = fmaxf(m, row[j]);
    }
    float s = 0.0f;
    for (int j = 0; j < hc; ++j) {
      row[j] = expf(row[j] - m);
      s += row[j];
    }
    for (int j = 0; j < hc; ++j) row[j] = row[j] / s + hc_eps;
  }
  mhc_col_norm(comb, hc, hc_eps);
  for (int it = 1; it < iters; ++it) {
    mhc_row_norm(comb, hc, hc_eps);
    mhc_col_norm(comb, hc, hc_eps);
  }
}

// Final hyper-head: pre only, no Sinkhorn (DeepSeek's ParallelHead.hc_head; transformers'
// DeepseekV4HyperHead): pre[i] = sigmoid(scale0 * mix[i] + base[i]) + hc_eps.
DSA_HD void mhc_head_weights(const float* mix, const float* scale, const float* base, int hc, float hc_eps,
                             float* pre) {
  for (int i = 0; i < hc; ++i) pre[i] = mhc_sigmoid(mix[i] * scale[0] + base[i]) + hc_eps;
}

}  // namespace dsa::ops
