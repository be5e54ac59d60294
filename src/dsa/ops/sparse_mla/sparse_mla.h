// Sparse-MLA decode attention (docs/model-reference.md §5): every query token attends to its own
// list of cache slots in one or two paged FP8 KV caches, with one softmax over the union of both
// lists plus an optional per-head sink logit that enters the denominator only.
//
//   q      bf16 [T][H][d_qk]      d_qk = 576 (fp8_ds_mla: GLM-5.1 / V3.2) or 512 (MODEL1: V4)
//   main   paged cache + indices int32 [T][K0] (global slots, -1 = skip) + optional lengths [T]
//   extra  optional second paged cache + indices [T][K1] (+ lengths), same cache kind as main
//   sink   optional fp32 [H]
//   o      bf16 [T][H][512]       lse fp32 [T][H] (natural log, without the sink term)
//
// Semantics (shared by the CPU reference and the CUDA kernels):
// - Key j of token t has score s_j = softmax_scale * q[t][h] . k_j; V is the first 512 values
//   of the same dequantized row (fp8_ds_mla: the latent part; MODEL1: NoPE + rope).
// - Entry p of a list is used iff p < length (lengths absent: all K entries; lengths are clamped
//   to [0, K]), the index is >= 0 and the slot is inside its cache (slot < num_pages * page).
//   Out-of-range slots are treated as -1 (skipped), never read.
// - Duplicated slots count as separate keys (as in the public reference kernels).
// - o = sum_j e^{s_j} v_j / (sum_j e^{s_j} + e^{sink_h}); lse = log sum_j e^{s_j}.
//   A token with no usable key gets o = 0 and lse = -inf (with or without a sink).
// - Dequantization: fp8_ds_mla value = e4m3 * fp32 scale of its 128-group; MODEL1 value =
//   e4m3 * 2^(ue8m0 - 127) of its 64-group; rope parts are bf16.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "dsa/core/tensor.h"
#include "dsa/formats/kv_cache_ops.h"

namespace dsa::ops {

// The caches attention reads are of the formats::KvFormat layouts DsMla (656 B per token,
// tokens back to back) and Model1 (pages of [P x 576 B data][P x 8 B scales]); Indexer key pages
// are not an attention cache (validate() refuses them).
int kv_cache_d_qk(formats::KvFormat k);  // 576 / 512

// One paged cache: a byte buffer holding num_pages() whole pages.
struct PagedKvCache {
  formats::KvFormat kind = formats::KvFormat::DsMla;
  int page_size = 64;  // tokens per page: a power of two in [1, 256]
  Tensor data;         // u8 [bytes], contiguous, 16-byte aligned; trailing partial page ignored
  size_t page_bytes() const;
  int64_t num_pages() const;
  int64_t num_slots() const { return num_pages() * page_size; }
};

struct SparseKeyList {
  PagedKvCache cache;
  Tensor indices;  // i32 [T][K]: global slots, -1 = skip
  Tensor lengths;  // optional i32 [T]: entries [0, length) are used (clamped to [0, K])
};

struct SparseMlaParams {
  Tensor q;                           // bf16 [T][H][d_qk]
  SparseKeyList main;                 // always present
  std::optional<SparseKeyList> extra; // V4: compressed cache (CSA top-k or HCA all entries)
  Tensor sink;                        // optional f32 [H]
  float softmax_scale = 0.f;          // > 0, e.g. 1/sqrt(576) or 1/sqrt(512)
  Tensor o;                           // bf16 [T][H][512] (written)
  Tensor lse;                         // f32 [T][H] (written)
  void* stream = nullptr;             // cudaStream_t for CUDA tensors (nullptr: default stream)

  int64_t tokens() const { return q.defined() ? q.size(0) : 0; }
  int heads() const { return q.defined() ? static_cast<int>(q.size(1)) : 0; }
  int d_qk() const { return kv_cache_d_qk(main.cache.kind); }
  // Throws dsa::Error naming the field and value for anything inconsistent: dtypes, shapes,
  // devices, head count (16/32/64/128), page size, cache kinds, alignment, scale.
  void validate() const;
};

constexpr int kSparseMlaDv = 512;

// A launch choice of the CUDA kernel. Every tactic computes the same result within the
// reference tolerance; only speed differs. heads_per_cta: query heads sharing one pass over the
// keys (16 or 32); splits: CTAs that share one token's key list (partials merged by a
// log-sum-exp combine kernel when > 1).
struct SparseMlaTactic {
  int heads_per_cta = 32;
  int splits = 1;
  std::string name() const;  // "h32_s4"
  bool operator==(const SparseMlaTactic&) const = default;
};

// Tactics valid for these params (index in the vector = tactic id for sparse_mla_decode):
// heads_per_cta dividing H, splits in {1, 2, 4, ..., 32} up to the number of 32-key tiles and
// with at most 1 GiB of split workspace (T * H * splits * 2 KB).
std::vector<SparseMlaTactic> sparse_mla_tactics(const SparseMlaParams& p);
// The tactic used for tactic id -1 (always valid): heuristic on T, H, key count and SM count.
SparseMlaTactic sparse_mla_default_tactic(const SparseMlaParams& p, int sm_count);

// Runs the op on the tensors' device: CPU tensors -> reference, CUDA tensors -> CUDA kernel
// (tactic: index into sparse_mla_tactics(p), -1 = default). Validates first.
void sparse_mla_decode(const SparseMlaParams& p, int tactic = -1);
// The tactic of the last CUDA launch of sparse_mla_decode in this process (any thread), for
// tests and logs that check which tactic ran; {0, 0} before the first launch.
SparseMlaTactic sparse_mla_last_launched_tactic();

// The CPU reference (double accumulation). Tensors must be on the CPU.
void sparse_mla_reference(const SparseMlaParams& p);

// Whether the CUDA kernel can run these params on `device` (capability 8.9+ and a kernel image
// for the device); returns the reason when not, nullopt when it can. Also false without CUDA.
std::optional<std::string> sparse_mla_cuda_unsupported_reason(const SparseMlaParams& p, int device = 0);

}  // namespace dsa::ops
