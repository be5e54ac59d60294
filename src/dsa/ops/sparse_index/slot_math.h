// Per-element rules of the index conversions (docs/kv-cache.md), shared by the CPU
// reference and the CUDA kernels so that both follow the same definition.
#pragma once
#include <cstdint>

#include "dsa/core/dtype_conv.h"  // DSA_HD

namespace dsa::ops::slot_math {

// Global slot of request-local position i of request req: block_table[req][i / P] * P + i % P.
// -1 when i < 0, req is outside [0, num_reqs), the block is past the table's width, the table
// entry is negative, or (num_pages > 0) the page is >= num_pages.
DSA_HD int32_t local_to_slot(int64_t i, int32_t req, const int32_t* block_table, int num_reqs, int max_blocks,
                             int page_size, int64_t num_pages) {
  if (i < 0 || req < 0 || req >= num_reqs) return -1;
  const int64_t blk = i / page_size;
  if (blk >= max_blocks) return -1;
  const int32_t page = block_table[static_cast<int64_t>(req) * max_blocks + blk];
  if (page < 0 || (num_pages > 0 && page >= num_pages)) return -1;
  const int64_t slot = static_cast<int64_t>(page) * page_size + i % page_size;
  return slot > 0x7FFFFFFF ? -1 : static_cast<int32_t>(slot);
}

// Number of compressed entries visible to a query at position pos with compression ratio m:
// entry e is visible iff e < (pos + 1) / m.
DSA_HD int64_t visible_compressed(int64_t pos, int ratio) { return pos < 0 ? 0 : (pos + 1) / ratio; }

// First position of the sliding window ending at pos (window includes pos): max(pos - w + 1, 0).
DSA_HD int64_t window_start(int64_t pos, int window) { return pos - window + 1 > 0 ? pos - window + 1 : 0; }

}  // namespace dsa::ops::slot_math
