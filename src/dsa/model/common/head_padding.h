// The head counts the sparse-MLA kernels run: 16, 32, 64 or 128. A model with fewer heads (a tiny
// checkpoint, a tensor-parallel shard) is padded with zero queries up to the next of these.
#pragma once
#include <cstdint>
#include <string_view>

#include "dsa/core/error.h"

namespace dsa::model {

inline int64_t padded_heads(int64_t heads, std::string_view model) {
  for (int64_t p : {16, 32, 64, 128})
    if (heads <= p) return p;
  fail("{}: {} attention heads; the sparse attention kernels take at most 128", model, heads);
}

}  // namespace dsa::model
