// Byte layouts of the paged KV caches, as constants and offset helpers shared by the CPU
// reference, the CUDA kernels and the attention backends (docs/kv-cache.md).
//
// A paged cache is one byte buffer of num_pages pages; a global slot s lives in page s / P at
// position s % P (P = page size in tokens). The slot of request-local position i is
// block_table[req][i / P] * P + i % P.
#pragma once
#include <cstddef>
#include <cstdint>

#include "dsa/core/dtype_conv.h"

namespace dsa::kv {

// ---- fp8_ds_mla (GLM-5.1, DeepSeek-V3.2): 656 bytes per token, tokens packed back to back ----
//   [0, 512)   512 e4m3 latent values
//   [512, 528) four fp32 scales, one per 128 latent values (dequant: e4m3 * scale)
//   [528, 656) 64 bf16 rope values
namespace ds_mla {
constexpr int kTokenBytes = 656;
constexpr int kNope = 512;
constexpr int kGroup = 128;
constexpr int kGroups = 4;
constexpr int kScaleOffset = 512;
constexpr int kRope = 64;
constexpr int kRopeOffset = 528;
constexpr int kDim = kNope + kRope;  // 576 = d_qk
DSA_HD size_t page_bytes(int page_size) { return static_cast<size_t>(page_size) * kTokenBytes; }
DSA_HD size_t token_offset(int64_t slot) { return static_cast<size_t>(slot) * kTokenBytes; }
}  // namespace ds_mla

// ---- MODEL1 (DeepSeek-V4): 584 logical bytes per token -----------------------------------
// Per page: [P x 576 B token data][P x 8 B scales], the page padded to a multiple of 576 B.
//   token data: [0, 448) e4m3 NoPE values, [448, 576) 64 bf16 rope values
//   scales:     7 UE8M0 bytes (one per 64 NoPE values) + 1 pad byte
namespace model1 {
constexpr int kTokenDataBytes = 576;
constexpr int kScaleBytes = 8;
constexpr int kLogicalBytes = 584;
constexpr int kNope = 448;
constexpr int kGroup = 64;
constexpr int kGroups = 7;
constexpr int kRope = 64;
constexpr int kRopeOffset = 448;
constexpr int kDim = kNope + kRope;  // 512 = d_qk = d_v
DSA_HD size_t page_bytes(int page_size) {
  size_t raw = static_cast<size_t>(page_size) * kLogicalBytes;
  return (raw + kTokenDataBytes - 1) / kTokenDataBytes * kTokenDataBytes;
}
// Offsets of a global slot's token data and scale bytes from the start of the cache buffer.
DSA_HD size_t data_offset(int64_t slot, int page_size) {
  return static_cast<size_t>(slot / page_size) * page_bytes(page_size) +
         static_cast<size_t>(slot % page_size) * kTokenDataBytes;
}
DSA_HD size_t scale_offset(int64_t slot, int page_size) {
  return static_cast<size_t>(slot / page_size) * page_bytes(page_size) +
         static_cast<size_t>(page_size) * kTokenDataBytes + static_cast<size_t>(slot % page_size) * kScaleBytes;
}
}  // namespace model1

// ---- Indexer key cache: 128 e4m3 + one fp32 scale = 132 B per entry ------------------------
// Per page: [P x 128 B keys][P x 4 B fp32 scales].
namespace indexer {
constexpr int kDim = 128;
constexpr int kEntryBytes = 132;
DSA_HD size_t page_bytes(int page_size) { return static_cast<size_t>(page_size) * kEntryBytes; }
DSA_HD size_t key_offset(int64_t slot, int page_size) {
  return static_cast<size_t>(slot / page_size) * page_bytes(page_size) + static_cast<size_t>(slot % page_size) * kDim;
}
DSA_HD size_t scale_offset(int64_t slot, int page_size) {
  return static_cast<size_t>(slot / page_size) * page_bytes(page_size) + static_cast<size_t>(page_size) * kDim +
         static_cast<size_t>(slot % page_size) * 4;
}
}  // namespace indexer

}  // namespace dsa::kv
