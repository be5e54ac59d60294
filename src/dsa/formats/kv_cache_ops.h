// Quantize + insert rows into the paged KV caches, and gather + dequantize rows back, for the
// three cache formats of kv_layout.h (docs/kv-cache.md):
//   DsMla   fp8_ds_mla (GLM-5.1, V3.2): 656 B/token, row = 512 latent + 64 rope = 576 values
//   Model1  DeepSeek-V4 MODEL1: 576 B token data + 8 B scale footer per token, row = 448 NoPE +
//           64 rope = 512 values; pages padded to a multiple of 576 B
//   Indexer indexer key cache: 128 e4m3 + fp32 scale = 132 B per entry, row = 128 values
// One call serves CPU and CUDA tensors (all tensors on one device; the CUDA path needs a CUDA
// build). Slots are global: slot s = page (s / page_size), position (s % page_size).
//
// Quantization (quant_math.h): per group of 128 (DsMla, Indexer) or 64 (Model1) values,
// scale = max(amax, 1e-4) / 448, rounded up to a power of two (Model1 always: UE8M0 byte;
// DsMla/Indexer: fp32 scale, ScaleRounding::Exact keeps amax/448 unrounded). e4m3 = x / scale,
// saturating. Rope values are stored as the bf16 given. Dequantization is e4m3 * scale in fp32
// and accepts any stored fp32 scale (GLM checkpoints use non-power-of-two scales).
//
// Slots: -1 means "skip" (insert writes nothing for that row; gather writes zeros). Any other
// slot outside [0, num_pages * page_size) is an error: the CPU path throws dsa::Error naming the
// row and slot before writing anything; the CUDA path cannot read slots on the host without a
// sync, so its kernels treat such a slot exactly like -1 (insert skips, gather writes zeros): they
// never touch memory outside the cache or the output. Duplicate slots in one insert: on the CPU
// the last row wins; on the GPU which row wins is unspecified.
//
// Page padding (Model1): the token at page position 0 also zeroes its page's tail padding (the
// bytes after the scale footer), and every token zeroes its own footer pad byte, so a fully
// written page has defined bytes everywhere.
#pragma once
#include <cstdint>
#include <string_view>

#include "dsa/core/tensor.h"
#include "dsa/formats/quant_math.h"

namespace dsa::formats {

// The paged cache layouts (kv_layout.h), one enum for every layer that handles them: DsMla (656 B
// per token, GLM-5.1 / V3.2), Model1 (DeepSeek-V4: pages of [P x 576 B data][P x 8 B scales]),
// Indexer (132 B per key: 128 e4m3 + an fp32 scale). Attention reads DsMla and Model1.
enum class KvFormat : uint8_t { DsMla, Model1, Indexer };
std::string_view kv_format_name(KvFormat f);  // "fp8_ds_mla", "fp8_model1", "indexer_fp8" (the attention plan's names)
int kv_row_dim(KvFormat f);                   // values per row given to insert / from gather
size_t kv_page_bytes(KvFormat f, int page_size);

struct KvInsertParams {
  KvFormat format = KvFormat::DsMla;
  int page_size = 64;
  Tensor cache;  // U8, contiguous, nbytes = num_pages * kv_page_bytes(format, page_size)
  Tensor kv;     // BF16 [N][kv_row_dim]; rows may be strided (stride(1) must be 1)
  Tensor slots;  // I64 [N], contiguous
  ScaleRounding rounding = ScaleRounding::Pow2Ceil;  // Model1 requires Pow2Ceil (UE8M0 scales)
  void* stream = nullptr;                            // cudaStream_t for the CUDA path (null = default)

  void validate() const;  // throws dsa::Error naming the field and value
  int64_t num_pages() const;
};

struct KvGatherParams {
  KvFormat format = KvFormat::DsMla;
  int page_size = 64;
  Tensor cache;  // U8, contiguous, as for insert
  Tensor slots;  // I64 [M], contiguous
  Tensor out;    // F32 or BF16 [M][kv_row_dim]; rows may be strided (stride(1) must be 1)
  void* stream = nullptr;

  void validate() const;
  int64_t num_pages() const;
};

void kv_insert(const KvInsertParams& p);
void kv_gather(const KvGatherParams& p);

// CPU references (called by kv_insert / kv_gather for host tensors; exposed for tests).
void kv_insert_cpu(const KvInsertParams& p);
void kv_gather_cpu(const KvGatherParams& p);

}  // namespace dsa::formats
