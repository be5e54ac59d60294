// Random paged KV caches for sparse MLA: the one generator that the tests (awkward scales plus the
// exact value of every slot, to check against), the benchmarks and the tuner (valid data at a
// fixed scale, so that timings see real values) fill caches with. NoPE values are e4m3 of N(0, 1)
// at their group's scale (never NaN), rope values bf16 N(0, 1).
#pragma once
#include <cstdint>
#include <random>

#include "dsa/ops/sparse_mla/sparse_mla.h"

namespace dsa::ops {

enum class RandomKvScales {
  Fixed,  // 1/16 for every group, no draws (benchmarks, tuning)
  Pow2,   // a power of two in [2^-7, 2^-4] per group
  Any,    // fp8_ds_mla: an fp32 uniform in [0.004, 0.05) per group; MODEL1 (UE8M0) as Pow2
};

// Fills every slot of `num_pages` host pages starting at `pages` (in `kind`'s layout with
// `page_size` tokens per page); bytes outside the slots (MODEL1's page tail) are left as they
// are. `truth` (optional): [num_pages * page_size][kv_cache_d_qk(kind)], each slot's exact
// dequantized row. The draws depend only on the arguments, so a seed replays the same cache.
void fill_random_kv_pages(formats::KvFormat kind, int page_size, uint8_t* pages, int64_t num_pages, RandomKvScales scales,
                          std::mt19937_64& gen, float* truth = nullptr);

}  // namespace dsa::ops
