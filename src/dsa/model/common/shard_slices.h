// Tensor-parallel shards cut out of full weights: ranges of rows or columns copied into new
// contiguous tensors, with the quantization scale blocks that cover them (FP8 128x128, MXFP4
// 1x32). The forwards' sharding plans (glm5/sharding.h, docs/parallelism.md) are written with
// these. Both models cut each tensor of a rank's shard from the memory-mapped checkpoint on the
// host while they build their weights, so only the shard reaches the device.
#pragma once
#include <cstdint>
#include <string_view>
#include <vector>

#include "dsa/core/tensor.h"
#include "dsa/model/common/linear.h"
#include "dsa/ops/linear/linear.h"
#include "dsa/ops/moe/expert_gemm.h"

namespace dsa::model {

struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};

// Rank's equal part of an extent n; throws naming `what` unless size divides n.
Range rank_range(int64_t n, int rank, int size, std::string_view what);

// Expert parallelism (--enable-expert-parallel): throws naming both values unless `size` ranks
// can each hold an equal number of the `experts` routed experts.
void check_expert_parallel(int64_t experts, int size);

// The ranges of t along dim, concatenated in order, as a new contiguous tensor on t's device.
Tensor gather_ranges(const Tensor& t, int64_t dim, const std::vector<Range>& ranges);

// Expert weights [E][N][K] (ops/moe layouts) keeping the rows (N) or the columns (K) in
// `ranges`. A range that cuts a scale block (FP8: 128 rows or columns, MXFP4: 32 columns)
// throws naming `what`.
ops::ExpertWeights expert_rows(const ops::ExpertWeights& w, const std::vector<Range>& ranges, std::string_view what);
ops::ExpertWeights expert_cols(const ops::ExpertWeights& w, const std::vector<Range>& ranges, std::string_view what);

// A linear [N][K] keeping the rows (out features) or columns (in features) in `ranges`, as new
// contiguous tensors; FP8 keeps the 128x128 scale blocks that cover them (a range that cuts a
// block throws naming `what`).
Linear linear_rows(const Linear& l, const std::vector<Range>& ranges, std::string_view what);
Linear linear_cols(const Linear& l, const std::vector<Range>& ranges, std::string_view what);

}  // namespace dsa::model
