// Lightning-indexer scoring and top-k selection (DeepSeek-V4 CSA layers and GLM-5.1 DSA): CPU
// reference and CUDA kernels (indexer.cu). One call handles a run of tokens of ONE request
// against that request's keys (the model loops over the requests of a batch).
//
//   score(t, e) = sum_h (w[t][h] * scale) * relu(q[t][h] . k[e])
//
// V4 (transformers DeepseekV4IndexerScorer; DeepSeek Indexer.forward): keys are the indexer
//   compressor's entries (ratio m = 4), w = weights_proj(x), scale = index_head_dim^-0.5 *
//   index_n_heads^-0.5 = 128^-0.5 * 64^-0.5; q = wq_b(q_res) as [64][128] with RoPE (compress theta,
//   YaRN) on its trailing 64 dims.
// GLM (transformers GlmMoeDsaIndexer): keys are per token (m = 1), k = LayerNorm(wk x) (weight +
//   bias, eps 1e-6) with RoPE on its FIRST 64 dims, q = wq_b(q_res) [32][128] with RoPE on its first
//   64 dims; transformers computes relu(q.k * 128^-0.5) * (w * heads^-0.5), which equals the
//   formula above with scale = 128^-0.5 * heads^-0.5 since the factor is positive.
// The per-token key/query preparation is composed by the caller from rms_norm/layer_norm/apply_rope.
//
// Causality: entry e is visible to the token at position pos iff e < (pos + 1) / m (integer
// division; m = 1: e <= pos). The first (pos+1)/m keys must exist (checked).
// Selection: the min(topk, visible) visible entries with the highest scores, written in
// descending score order; EQUAL SCORES ARE BROKEN BY THE LOWER ENTRY INDEX FIRST (deterministic;
// torch.topk leaves the order of ties unspecified). Remaining slots are -1.
// FP8/FP4 key quantisation and the Hadamard rotation of the reference implementation are not
// simulated here: keys are plain f32/bf16 values (the rotation does not change dot products).
#pragma once
#include <cstdint>

#include "dsa/core/tensor.h"

namespace dsa::ops {

// How CUDA picks a row's top k (the result is the same): one CTA per row over the whole row
// (PerRow: a 64-bit radix select over global memory and a bitonic sort); the wide selection,
// which first cuts each row to its candidates with CTAs over 2048-entry segments
// (indexer_cuda.h); or Fast, one CTA per row holding the row in registers (a 32-bit radix
// select, a bucket sort of the chosen; rows of at most kTopkSelectFastMaxEntries entries,
// indexer_select_fast.cu). Auto: wide for rows of more than 8192 entries in steps of at most 64
// rows (decode at long context, where one CTA per row left the GPU idle), else per row (prefill:
// the rows alone fill the GPU, and the candidate list would be [T][N]); but first Fast, for rows
// of at most kTopkSelectFastMaxEntries entries (up to 16K GLM tokens / 64K V4 tokens), unless
// DSA_INDEXER_FAST_SELECT=0 (`dsa bench indexer` compares the paths).
enum class TopkSelectPath { Auto, PerRow, Wide, Fast };
constexpr int64_t kTopkSelectFastMaxEntries = 16384;
// The path topk_select takes for `rows` rows of `entries` entries (Auto resolved).
TopkSelectPath topk_select_path(int64_t rows, int64_t entries, TopkSelectPath path);
bool topk_select_is_wide(int64_t rows, int64_t entries, TopkSelectPath path);

struct IndexerParams {
  int64_t topk = 512;
  int64_t ratio = 4;    // m (1 for GLM)
  float scale = 1.0f;   // multiplies every head weight
  TopkSelectPath select = TopkSelectPath::Auto;  // CUDA only

  static IndexerParams v4(int64_t topk, int64_t n_heads = 64, int64_t head_dim = 128, int64_t ratio = 4);
  static IndexerParams glm(int64_t topk = 2048, int64_t n_heads = 32, int64_t head_dim = 128);
  void validate() const;
};

// q: [T][H][D] f32|bf16;  keys: [N][D] f32|bf16 (request-local entries 0..N-1);
// weights: [T][H] f32|bf16 (raw weights_proj output);  positions: [T] i32|i64 (>= 0);
// indices (out): [T][topk] i32;  scores (optional out): [T][N] f32, -inf where not visible.
// All contiguous and on one device. indexer_topk = indexer_scores + topk_select (on CUDA a
// [T][N] f32 scratch is allocated when `scores` is not given). The CPU accumulates in double,
// the GPU in float: near-equal scores may be ordered differently by the two.
// CUDA limits: H*D + H <= 12288 (q of one token in shared memory), D <= 256, topk <= 2048,
// N <= 4194240 entries. TopkSelectPath::Fast: N <= kTopkSelectFastMaxEntries.
// On CUDA, positions are not range-checked (the CPU path checks (pos+1)/m <= N and pos >= 0);
// the kernels clamp visibility to [0, N].
void indexer_topk(const Tensor& q, const Tensor& keys, const Tensor& weights, const Tensor& positions,
                  const IndexerParams& p, const Tensor& indices, const Tensor& scores = Tensor());

// Keys of every request of a step in a paged indexer key cache (the formats' indexer layout: per
// page [P x 128 e4m3 keys][P x fp32 scales]). Request-local entry e of the request in row r of
// block_table lives at slot block_table[r][e / P] * P + e % P.
struct PagedIndexerKeys {
  Tensor cache;        // u8, whole pages, contiguous
  int page_size = 64;  // entries per page (>= 1)
  Tensor block_table;  // i32 [R][blocks], < 0 = no page
  Tensor token_req;    // i32 [T]: row of each token's request in block_table
};

// indexer_scores over the paged keys of each token's own request, dequantized exactly as
// kv_gather does (e4m3 * scale): scores [T][N] f32, N >= the most entries any token of the step
// sees (known on the host, e.g. the step's bucketed index_len / ratio). Entry e of token t is scored when
// e < (pos + 1) / ratio and its page exists (a missing page, a page >= the cache's page count or
// an entry past the block table give -inf, on both devices); every other entry gets -inf.
// q: [T][H][128] f32|bf16, weights [T][H] f32|bf16, positions [T] i32|i64. CUDA: H <= 64.
// Batched over requests in one launch: this is what the model forwards use.
void indexer_scores_paged(const Tensor& q, const PagedIndexerKeys& keys, const Tensor& weights, const Tensor& positions,
                          const IndexerParams& p, const Tensor& scores);

// The two halves. indexer_scores writes scores [T][N] (-inf where e >= (pos+1)/m);
// topk_select picks, per row, the min(topk, visible) highest scores among the visible entries
// (descending, ties -> lower index first) and pads with -1. p.scale is unused by topk_select.
void indexer_scores(const Tensor& q, const Tensor& keys, const Tensor& weights, const Tensor& positions,
                    const IndexerParams& p, const Tensor& scores);
void topk_select(const Tensor& scores, const Tensor& positions, const IndexerParams& p, const Tensor& indices);

}  // namespace dsa::ops
