#include "dsa/kv/page_allocator.h"

#include <limits>

#include "dsa/core/error.h"

namespace dsa::kv {

PageAllocator::PageAllocator(int64_t num_pages) {
  DSA_CHECK(num_pages >= 0 && num_pages <= std::numeric_limits<int32_t>::max(),
            "PageAllocator: num_pages = {} (must be in [0, 2^31))", num_pages);
  used_.assign(static_cast<size_t>(num_pages), 0);
  free_.reserve(static_cast<size_t>(num_pages));
  for (int64_t p = num_pages; p-- > 0;) free_.push_back(static_cast<int32_t>(p));
}

int32_t PageAllocator::allocate() {
  DSA_CHECK(!free_.empty(), "PageAllocator: all {} pages are in use", num_pages());
  const int32_t p = free_.back();
  free_.pop_back();
  used_[p] = 1;
  return p;
}

void PageAllocator::free(int32_t page) {
  DSA_CHECK(page >= 0 && page < num_pages(), "PageAllocator: free of page {} outside [0, {})", page, num_pages());
  DSA_CHECK(used_[page], "PageAllocator: page {} freed twice", page);
  used_[page] = 0;
  free_.push_back(page);
}

}  // namespace dsa::kv
