#include "dsa/model/glm5/kv_pages.h"

#include "dsa/core/error.h"
#include "dsa/formats/kv_cache_ops.h"

namespace dsa::model::glm5 {

LatentPages::LatentPages(int layers, int64_t num_pages, Device dev) : num_pages_(num_pages) {
  DSA_CHECK(num_pages > 0 && num_pages < (int64_t{1} << 31) / kPageSize, "glm5 KV: num_pages {} out of range",
            num_pages);
  const size_t bytes = static_cast<size_t>(num_pages) * formats::kv_page_bytes(formats::KvFormat::DsMla, kPageSize);
  for (int l = 0; l < layers; ++l) pools_.push_back(Tensor::zeros({static_cast<int64_t>(bytes)}, DType::U8, dev));
  for (int64_t p = num_pages - 1; p >= 0; --p) free_.push_back(static_cast<int32_t>(p));
}

void LatentPages::reserve(std::vector<int32_t>& blocks, int64_t len) {
  const int64_t need = (len + kPageSize - 1) / kPageSize - static_cast<int64_t>(blocks.size());
  if (need <= 0) return;
  DSA_CHECK(need <= num_free(), "glm5 KV: out of pages ({} needed, {} free of {}); load with more pages "
                                "(DSA_GLM5_KV_PAGES)", need, num_free(), num_pages_);
  for (int64_t i = 0; i < need; ++i) {
    blocks.push_back(free_.back());
    free_.pop_back();
  }
}

void LatentPages::release(std::vector<int32_t>& blocks) {
  for (int32_t p : blocks) free_.push_back(p);
  blocks.clear();
}

ops::PagedKvCache LatentPages::cache(int layer) const {
  ops::PagedKvCache c;
  c.kind = ops::KvCacheKind::Fp8DsMla;
  c.page_size = kPageSize;
  c.data = pools_.at(static_cast<size_t>(layer));
  return c;
}

}  // namespace dsa::model::glm5
