// Host side of the CUDA index conversions: argument packing.
#ifdef DSA_WITH_CUDA
#include "dsa/core/cuda_launch.h"
#include "dsa/ops/sparse_index/cuda/kernels.h"
#include "dsa/ops/sparse_index/sparse_index.h"

namespace dsa::ops::sparse_index_cuda {
namespace {

Common make_common(const Tensor& token_req, const BlockTable& b, const Tensor& slots, const Tensor& counts) {
  Common c{};
  c.token_req = token_req.data<int32_t>();
  c.table = b.table.data<int32_t>();
  c.num_reqs = static_cast<int>(b.table.size(0));
  c.max_blocks = static_cast<int>(b.table.size(1));
  c.page_size = b.page_size;
  c.num_pages = b.num_pages;
  c.slots = slots.data<int32_t>();
  c.counts = counts.defined() ? counts.data<int32_t>() : nullptr;
  c.T = slots.size(0);
  c.K = slots.size(1);
  return c;
}

}  // namespace

void topk_to_slots(const TopkToSlotsParams& p) {
  cuda_launch::set_device(p.local.device().index);
  launch_topk(make_common(p.token_req, p.blocks, p.slots, p.valid_counts), p.local.data<int32_t>(), p.stream);
}

void hca_slots(const PositionSlotsParams& p, int ratio) {
  cuda_launch::set_device(p.positions.device().index);
  launch_positions(make_common(p.token_req, p.blocks, p.slots, p.valid_counts), p.positions.data<int32_t>(), 0, ratio,
                   p.stream);
}

void swa_slots(const PositionSlotsParams& p) {
  cuda_launch::set_device(p.positions.device().index);
  launch_positions(make_common(p.token_req, p.blocks, p.slots, p.valid_counts), p.positions.data<int32_t>(), 1, 0,
                   p.stream);
}

}  // namespace dsa::ops::sparse_index_cuda
#endif  // DSA_WITH_CUDA
