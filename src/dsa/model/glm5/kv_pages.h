// The paged latent cache of the GLM forward: one fp8_ds_mla pool per layer (656 B per token,
// pages of 64 tokens, REFERENCE section 4) and a free list of page ids shared by all layers, so a
// request has ONE block table (logical block i -> page) that addresses every layer's pool.
// Deliberately small: the engine's KvManager (src/dsa/engine, branch kvmgr) is meant to replace
// it behind the same three calls (reserve, release, cache).
#pragma once
#include <cstdint>
#include <vector>

#include "dsa/core/tensor.h"
#include "dsa/ops/sparse_mla/sparse_mla.h"

namespace dsa::model::glm5 {

class LatentPages {
 public:
  static constexpr int kPageSize = 64;
  LatentPages(int layers, int64_t num_pages, Device dev);
  // Grows `blocks` so that positions [0, len) have pages. Throws dsa::Error when the pool has too
  // few free pages (nothing changes then).
  void reserve(std::vector<int32_t>& blocks, int64_t len);
  void release(std::vector<int32_t>& blocks);  // returns the pages and clears the table
  ops::PagedKvCache cache(int layer) const;
  int64_t num_pages() const { return num_pages_; }
  int64_t num_free() const { return static_cast<int64_t>(free_.size()); }

 private:
  int64_t num_pages_;
  std::vector<Tensor> pools_;   // per layer u8 [num_pages * 64 * 656]
  std::vector<int32_t> free_;   // free page ids (a stack)
};

}  // namespace dsa::model::glm5
