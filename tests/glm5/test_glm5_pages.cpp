// LatentPages: the GLM forward's paged latent cache (one block table per request, pages of 64).
#include <algorithm>
#include <set>

#include "common/testing.h"
#include "dsa/formats/kv_cache_ops.h"
#include "dsa/model/glm5/kv_pages.h"

using namespace dsa;
using dsa::model::glm5::LatentPages;

TEST(Glm5Pages, ReserveReleaseAndOutOfPages) {
  LatentPages pages(2, 4, Device::cpu());
  EXPECT_EQ(pages.num_free(), 4);
  std::vector<int32_t> a, b;
  pages.reserve(a, 1);  // position 0 needs one page
  EXPECT_EQ(a.size(), 1u);
  pages.reserve(a, 64);  // still one page
  EXPECT_EQ(a.size(), 1u);
  pages.reserve(a, 65);
  EXPECT_EQ(a.size(), 2u);
  pages.reserve(b, 128);
  EXPECT_EQ(b.size(), 2u);
  std::set<int32_t> all(a.begin(), a.end());
  all.insert(b.begin(), b.end());
  EXPECT_EQ(all.size(), 4u);  // distinct pages
  for (int32_t p : all) EXPECT_TRUE(p >= 0 && p < 4);
  EXPECT_THROW(pages.reserve(a, 129), Error);  // no page left: nothing changes
  EXPECT_EQ(a.size(), 2u);
  EXPECT_EQ(pages.num_free(), 0);
  pages.release(b);
  EXPECT_TRUE(b.empty());
  EXPECT_EQ(pages.num_free(), 2);
  pages.reserve(a, 129);
  EXPECT_EQ(a.size(), 3u);
  // Each layer has its own pool of whole fp8_ds_mla pages.
  EXPECT_EQ(pages.cache(0).num_pages(), 4);
  EXPECT_EQ(pages.cache(1).data.nbytes(), 4 * formats::kv_page_bytes(formats::KvFormat::DsMla, 64));
  EXPECT_NE(pages.cache(0).data.raw(), pages.cache(1).data.raw());
  EXPECT_THROW(LatentPages(1, 0, Device::cpu()), Error);
}
