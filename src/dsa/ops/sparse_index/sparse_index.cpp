// Index conversions: checks, CPU reference loops and the device dispatch.
#include "dsa/ops/sparse_index/sparse_index.h"

#include "dsa/ops/sparse_index/slot_math.h"

namespace dsa::ops {
namespace {

void check_i32(const Tensor& t, const char* name, const Shape& shape, Device dev) {
  DSA_CHECK(t.defined(), "sparse_index: {} is missing", name);
  DSA_CHECK(t.dtype() == DType::I32 && t.shape() == shape && t.is_contiguous(),
            "sparse_index: {} must be contiguous i32 {}, got {}", name, shape_str(shape), t.str());
  DSA_CHECK(t.device() == dev, "sparse_index: {} is on {} but the inputs are on {}", name, t.device().str(), dev.str());
}

void check_blocks(const BlockTable& b, Device dev) {
  DSA_CHECK(b.table.defined() && b.table.dtype() == DType::I32 && b.table.dim() == 2 && b.table.is_contiguous(),
            "sparse_index: block table must be contiguous i32 [R][max_blocks], got {}",
            b.table.defined() ? b.table.str() : "nothing");
  DSA_CHECK(b.table.device() == dev, "sparse_index: block table is on {} but the inputs are on {}",
            b.table.device().str(), dev.str());
  DSA_CHECK(b.page_size >= 1, "sparse_index: page_size = {} (must be >= 1)", b.page_size);
  DSA_CHECK(b.num_pages >= 0, "sparse_index: num_pages = {} (must be >= 0)", b.num_pages);
}

void check_rows(const Tensor& token_req, const Tensor& slots, const Tensor& counts, Device dev) {
  DSA_CHECK(slots.defined() && slots.dim() == 2 && slots.size(1) >= 1,
            "sparse_index: slots must be i32 [T][K>=1], got {}", slots.defined() ? slots.str() : "nothing");
  const int64_t T = slots.size(0);
  check_i32(token_req, "token_req", {T}, dev);
  check_i32(slots, "slots", {T, slots.size(1)}, dev);
  if (counts.defined()) check_i32(counts, "valid_counts", {T}, dev);
}

}  // namespace

void TopkToSlotsParams::validate() const {
  DSA_CHECK(local.defined() && local.dim() == 2, "sparse_index: local must be i32 [T][K], got {}",
            local.defined() ? local.str() : "nothing");
  const Device dev = local.device();
  check_i32(local, "local", local.shape(), dev);
  check_blocks(blocks, dev);
  check_rows(token_req, slots, valid_counts, dev);
  DSA_CHECK(slots.shape() == local.shape(), "sparse_index: slots {} must have local's shape {}", shape_str(slots.shape()),
            shape_str(local.shape()));
}

void PositionSlotsParams::validate() const {
  DSA_CHECK(positions.defined() && positions.dim() == 1, "sparse_index: positions must be i32 [T], got {}",
            positions.defined() ? positions.str() : "nothing");
  const Device dev = positions.device();
  check_i32(positions, "positions", positions.shape(), dev);
  check_blocks(blocks, dev);
  check_rows(token_req, slots, valid_counts, dev);
  DSA_CHECK(slots.size(0) == positions.size(0), "sparse_index: slots has {} rows but positions has {}", slots.size(0),
            positions.size(0));
}

void topk_to_global_slots(const TopkToSlotsParams& p) {
  p.validate();
  if (p.local.device().is_cuda()) {
#ifdef DSA_WITH_CUDA
    sparse_index_cuda::topk_to_slots(p);
    return;
#else
    fail("topk_to_global_slots: tensors are on {} but this build of dsa has no CUDA", p.local.device().str());
#endif
  }
  const int64_t T = p.local.size(0), K = p.local.size(1);
  const int R = static_cast<int>(p.blocks.table.size(0)), MB = static_cast<int>(p.blocks.table.size(1));
  const int32_t* bt = p.blocks.table.data<int32_t>();
  for (int64_t t = 0; t < T; ++t) {
    const int32_t req = p.token_req.data<int32_t>()[t];
    int32_t n = 0;
    for (int64_t k = 0; k < K; ++k) {
      const int32_t s = slot_math::local_to_slot(p.local.data<int32_t>()[t * K + k], req, bt, R, MB, p.blocks.page_size,
                                                 p.blocks.num_pages);
      p.slots.data<int32_t>()[t * K + k] = s;
      n += s >= 0;
    }
    if (p.valid_counts.defined()) p.valid_counts.data<int32_t>()[t] = n;
  }
}

namespace {
// Shared CPU loop of the position-based lists: row t holds local positions first..first+len-1.
template <class RangeFn>
void position_lists_cpu(const PositionSlotsParams& p, RangeFn range) {
  const int64_t T = p.slots.size(0), K = p.slots.size(1);
  const int R = static_cast<int>(p.blocks.table.size(0)), MB = static_cast<int>(p.blocks.table.size(1));
  const int32_t* bt = p.blocks.table.data<int32_t>();
  for (int64_t t = 0; t < T; ++t) {
    const int32_t req = p.token_req.data<int32_t>()[t];
    int64_t first, len;
    range(static_cast<int64_t>(p.positions.data<int32_t>()[t]), first, len);
    int32_t n = 0;
    for (int64_t k = 0; k < K; ++k) {
      const int32_t s = k < len ? slot_math::local_to_slot(first + k, req, bt, R, MB, p.blocks.page_size, p.blocks.num_pages) : -1;
      p.slots.data<int32_t>()[t * K + k] = s;
      n += s >= 0;
    }
    if (p.valid_counts.defined()) p.valid_counts.data<int32_t>()[t] = n;
  }
}
}  // namespace

void hca_visible_slots(const PositionSlotsParams& p, int ratio) {
  p.validate();
  DSA_CHECK(ratio >= 1, "hca_visible_slots: ratio = {} (must be >= 1)", ratio);
  if (p.positions.device().is_cuda()) {
#ifdef DSA_WITH_CUDA
    sparse_index_cuda::hca_slots(p, ratio);
    return;
#else
    fail("hca_visible_slots: tensors are on {} but this build of dsa has no CUDA", p.positions.device().str());
#endif
  }
  position_lists_cpu(p, [&](int64_t pos, int64_t& first, int64_t& len) {
    first = 0;
    len = slot_math::visible_compressed(pos, ratio);
  });
}

void swa_window_slots(const PositionSlotsParams& p) {
  p.validate();
  if (p.positions.device().is_cuda()) {
#ifdef DSA_WITH_CUDA
    sparse_index_cuda::swa_slots(p);
    return;
#else
    fail("swa_window_slots: tensors are on {} but this build of dsa has no CUDA", p.positions.device().str());
#endif
  }
  const int window = static_cast<int>(p.slots.size(1));
  position_lists_cpu(p, [&](int64_t pos, int64_t& first, int64_t& len) {
    if (pos < 0) {
      first = 0;
      len = 0;
      return;
    }
    first = slot_math::window_start(pos, window);
    len = pos - first + 1;
  });
}

}  // namespace dsa::ops
