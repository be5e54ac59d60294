// Valid random cache rows for benchmarks and tuning (not for tests, which build their own
// awkward cases): e4m3 of N(0, 16) with scale 1/16 (fp8_ds_mla) or 2^(123-127) (MODEL1), bf16
// rope N(0, 1). Never zeros, never NaN, so timings see real data.
#pragma once
#include <cstdint>
#include <random>

#include "dsa/ops/sparse_mla/sparse_mla.h"

namespace dsa::ops {

// Fills every slot of `num_pages` host pages starting at `pages` (page_bytes each, in `kind`'s
// layout with `page_size` tokens per page).
void fill_random_kv_pages(KvCacheKind kind, int page_size, uint8_t* pages, int64_t num_pages, std::mt19937_64& gen);

}  // namespace dsa::ops
