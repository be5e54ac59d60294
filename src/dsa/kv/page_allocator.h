// PageAllocator: the free list of one cache group's pages. Deterministic: a fresh allocator hands
// out pages 0, 1, 2, ...; a freed page is the next one handed out (stack order), so the same
// sequence of calls always gives the same pages.
#pragma once
#include <cstdint>
#include <vector>

namespace dsa::kv {

class PageAllocator {
 public:
  explicit PageAllocator(int64_t num_pages = 0);

  int64_t num_pages() const { return static_cast<int64_t>(used_.size()); }
  int64_t num_free() const { return static_cast<int64_t>(free_.size()); }
  int64_t num_used() const { return num_pages() - num_free(); }
  bool is_used(int32_t page) const { return page >= 0 && page < num_pages() && used_[page]; }

  int32_t allocate();        // throws dsa::Error when no page is free (callers check num_free())
  void free(int32_t page);   // throws dsa::Error for a page out of range or not in use

 private:
  std::vector<int32_t> free_;  // back() is handed out next
  std::vector<uint8_t> used_;
};

}  // namespace dsa::kv
