// The tiny GLM checkpoint the tensor-parallel tests run (test_tensor_parallel.cpp,
// test_tp_engine.cpp): 4 heads, intermediate sizes of 512 (so that 4 ranks hold 128 each), and no
// discrete choice left, so that the ranks' bf16 rounding of partial sums cannot flip one: the
// indexer keeps every key (index_topk above every position the tests reach) and every token goes
// to every routed expert (the weights stay those of seed 1). Written once per process and
// (fp8, index_topk), removed at exit.
#pragma once
#include <cstdint>
#include <string>

namespace dsa::engine::test {

inline constexpr uint64_t kTpCheckpointSeed = 1;

const std::string& tp_checkpoint_dir(bool fp8 = true, int64_t index_topk = 64);

// The tiny DeepSeek-V4 the tensor-parallel tests run, on the same rule: 4 heads in 4 output groups
// and expert intermediate size 512 (so that 2 and 4 ranks shard it), every token routed to every
// expert (hash layers too: tid2eid lists all of them), and index_topk above every compressed
// entry the tests reach (CSA entries are 4 positions each). FP8 projections, MXFP4 experts.
const std::string& tp_v4_checkpoint_dir(int64_t index_topk = 64);

}  // namespace dsa::engine::test
