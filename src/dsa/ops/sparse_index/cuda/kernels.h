// POD interface of the index-conversion kernels (kept free of engine headers: nvcc compiles
// only this and kernels.cu; launch.cpp packs the arguments).
#pragma once
#include <cstdint>

namespace dsa::ops::sparse_index_cuda {

struct Common {
  const int32_t* token_req;
  const int32_t* table;
  int num_reqs, max_blocks, page_size;
  int64_t num_pages;
  int32_t* slots;
  int32_t* counts;  // may be null (else zeroed by the launcher)
  int64_t T, K;
};

// Throw dsa::Error when a launch fails. mode 0: HCA visible entries (ratio), 1: sliding window of K.
void launch_topk(const Common& c, const int32_t* local, void* stream);
void launch_positions(const Common& c, const int32_t* positions, int mode, int ratio, void* stream);

}  // namespace dsa::ops::sparse_index_cuda
