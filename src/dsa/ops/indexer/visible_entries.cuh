// The indexer kernels' visibility rule, in one place: token t at position pos sees the entries
// e < (pos + 1) / ratio (entry i closes at position (i + 1) * ratio - 1), clamped to [0, N].
#pragma once
#include <cstdint>

namespace dsa::ops::cuda {

__device__ __forceinline__ int64_t visible_entries(const void* positions, bool i64, int64_t t, int64_t ratio,
                                                   int64_t N) {
  const int64_t pos = i64 ? static_cast<const int64_t*>(positions)[t] : static_cast<const int32_t*>(positions)[t];
  const int64_t v = (pos + 1) / ratio;
  return v < 0 ? 0 : (v > N ? N : v);
}

}  // namespace dsa::ops::cuda
