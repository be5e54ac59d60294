// DeepSeek-V4 KV compressor (CSA: ratio m = 4 with overlapping windows; HCA: m = 128), CPU
// reference with explicit per-request state.
//
// Inputs per token (projections are linear layers owned by the caller): kv = wkv(x) and
// score = wgate(x), both [coff*d] with coff = 2 for the overlapping m = 4 compressor and 1 for
// m = 128; the learned position bias ape [m][coff*d] is added to the score of the token in window
// slot pos % m. When a window closes ((pos+1) % m == 0) entry w = pos / m is emitted:
//   m = 128: entry = sum over the window's m rows of softmax_rows(score) * kv   (per dimension)
//   m = 4:   the softmax runs over 2m = 8 rows per dimension: the PREVIOUS window's 4 rows of the
//            first half of the dims ("Ca", kv[:, :d], score[:, :d]) and the CURRENT window's 4 rows
//            of the second half ("Cb", kv[:, d:], score[:, d:]); for w = 0 the previous rows do
//            not exist and get weight 0 (DeepSeek's overlap_transform pads score with -inf;
//            transformers' DeepseekV4CSACompressor: Ca = [..., :head_dim] of window w-1,
//            Cb = [..., head_dim:] of window w).
//   then entry = RMSNorm(entry) * norm_weight (eps norm_eps), then RoPE (interleaved, on the
//   trailing rope_dim dims, compress theta + YaRN) at position w * m (the window's first token;
//   DeepSeek: freqs_cis[start_pos + 1 - ratio]).
// The indexer's own compressor is the same op at head_dim 128 (m = 4, overlap).
//
// State (docs/kv-cache.md): fp32 kv and score+ape rows of the open window, and for m = 4 the
// previous complete window's rows (only their Ca half is read). Tokens are consumed one at a
// time in position order, so feeding a sequence in any chunking gives exactly the same entries
// as feeding it at once (tested). Entries are computed in double and rounded once to the output
// dtype (DeepSeek's model.py rounds the pooled vector to bf16 before the norm; transformers keeps
// parts in bf16: bf16-level differences).
#pragma once
#include <cstdint>

#include "dsa/core/tensor.h"
#include "dsa/ops/rope/rope.h"

namespace dsa::ops {

struct CompressorConfig {
  int64_t ratio = 4;       // m
  bool overlap = true;     // V4: true exactly when m == 4
  int64_t head_dim = 512;  // d: 512 (attention compressor) or 128 (indexer compressor)
  float norm_eps = 1e-6f;
  RopeConfig rope = RopeConfig::v4_compress();  // rope.rope_dim trailing dims are rotated

  static CompressorConfig v4(int64_t ratio, int64_t head_dim, float norm_eps = 1e-6f);
  int64_t coff() const { return overlap ? 2 : 1; }
  int64_t width() const { return coff() * head_dim; }  // per-token kv/score width
  void validate() const;
};

// Per-request compressor state; survives across calls (prefill chunks, decode steps).
struct CompressorState {
  int64_t next_pos = 0;  // position of the next token to feed
  // f32 [coff*m][coff*d]. Overlap: rows [0, m) = previous complete window, rows [m, 2m) = open
  // window. No overlap: rows [0, m) = open window. score holds score + ape; -inf = no token.
  Tensor kv, score;

  // Empty state at position 0 on `dev` (the device of the tensors later fed to it).
  static CompressorState create(const CompressorConfig& cfg, Device dev = Device::cpu());
  void reset();
};

// Entries emitted while feeding `tokens` tokens starting at position `start_pos`.
int64_t compressor_entries_emitted(const CompressorConfig& cfg, int64_t start_pos, int64_t tokens);

struct CompressorResult {
  int64_t first_entry = 0;  // request-local index of entries_out row 0 (= start_pos / m)
  int64_t count = 0;        // rows of entries_out written
};

// Feeds T consecutive tokens of one request (positions state.next_pos .. +T-1).
//   kv, score: [T][coff*d] f32|bf16 (wkv(x), wgate(x));  ape: [m][coff*d] f32;
//   norm_weight: [d] f32|bf16;  entries_out: [>= emitted][d] f32|bf16, contiguous.
// All tensors (and the state) on one device: the CPU reference, or on CUDA the kernel in
// compressor.cu followed by the norm and RoPE kernels (fp32 softmax/pooling on the GPU).
CompressorResult compressor_forward(const CompressorConfig& cfg, CompressorState& state, const Tensor& kv,
                                    const Tensor& score, const Tensor& ape, const Tensor& norm_weight,
                                    const Tensor& entries_out);

}  // namespace dsa::ops
