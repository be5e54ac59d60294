// CPU reference of the contiguous MoE layout, permutation and combine; dispatch to CUDA.
#include "dsa/ops/moe/layout.h"

#include <algorithm>
#include <vector>

#include "dsa/core/dtype_conv.h"
#ifdef DSA_WITH_CUDA
#include "dsa/ops/moe/cuda_ops.h"
#endif

namespace dsa::ops {

static int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

int64_t moe_rows_upper_bound(int64_t tokens, int64_t topk, int64_t experts, int64_t alignment) {
  DSA_CHECK(tokens >= 0 && topk >= 1 && experts >= 1 && alignment >= 1,
            "moe_rows_upper_bound: bad arguments tokens={} topk={} experts={} alignment={}", tokens, topk, experts,
            alignment);
  const int64_t mk = tokens * topk;
  return round_up(mk + std::min(mk, experts) * (alignment - 1), alignment);
}

MoeLayout make_moe_layout(int64_t tokens, int64_t topk, int64_t experts, int64_t alignment, Device dev) {
  DSA_CHECK(alignment >= 16 && alignment % 16 == 0, "moe layout: alignment {} must be a positive multiple of 16",
            alignment);
  DSA_CHECK(experts >= 1 && experts <= 1024, "moe layout: experts {} outside [1, 1024]", experts);
  MoeLayout l;
  l.tokens = tokens;
  l.topk = topk;
  l.experts = experts;
  l.alignment = alignment;
  l.rows_cap = moe_rows_upper_bound(tokens, topk, experts, alignment);
  l.expert_offsets = Tensor::empty({experts + 1}, DType::I32, dev);
  l.expert_counts = Tensor::empty({experts}, DType::I32, dev);
  l.m_indices = Tensor::empty({l.rows_cap}, DType::I32, dev);
  l.src_token = Tensor::empty({l.rows_cap}, DType::I32, dev);
  l.dst_row = Tensor::empty({tokens, topk}, DType::I32, dev);
  l.cursor = Tensor::empty({experts}, DType::I32, dev);
  return l;
}

static void check_layout(const MoeLayout& l, Device d, const char* what) {
  DSA_CHECK(l.m_indices.defined(), "{}: layout is not allocated (make_moe_layout)", what);
  l.expert_offsets.check(what, DType::I32, {l.experts + 1});
  l.expert_counts.check(what, DType::I32, {l.experts});
  l.m_indices.check(what, DType::I32, {l.rows_cap});
  l.src_token.check(what, DType::I32, {l.rows_cap});
  l.dst_row.check(what, DType::I32, {l.tokens, l.topk});
  DSA_CHECK(l.expert_base >= 0 && l.expert_base <= (int64_t{1} << 30), "{}: expert_base {} outside [0, 2^30]", what,
            l.expert_base);
  DSA_CHECK(l.rows_cap >= moe_rows_upper_bound(l.tokens, l.topk, l.experts, l.alignment),
            "{}: rows_cap {} below the upper bound", what, l.rows_cap);
  DSA_CHECK(l.m_indices.device() == d && l.dst_row.device() == d && l.src_token.device() == d &&
                l.expert_offsets.device() == d && l.expert_counts.device() == d,
            "{}: layout tensors must be on {}", what, d.str());
}

void validate_moe_layout(const Tensor& topk_ids, const MoeLayout& l) {
  topk_ids.check("build_moe_layout: topk_ids", DType::I32, {l.tokens, l.topk});
  DSA_CHECK(topk_ids.is_contiguous(), "build_moe_layout: topk_ids must be contiguous");
  check_layout(l, topk_ids.device(), "build_moe_layout");
}

void build_moe_layout(const Tensor& topk_ids, MoeLayout& l) {
  validate_moe_layout(topk_ids, l);
  if (topk_ids.device().is_cuda()) {
#ifdef DSA_WITH_CUDA
    cuda::build_moe_layout(topk_ids, l);
    return;
#else
    fail("build_moe_layout: no CUDA in this build");
#endif
  }
  const int64_t T = l.tokens, k = l.topk, E = l.experts, a = l.alignment, base = l.expert_base;
  const int32_t* ids = topk_ids.data<int32_t>();
  auto local = [&](int64_t i) -> int64_t {  // the slot's local expert, or -1 when not this layout's
    const int64_t e = static_cast<int64_t>(ids[i]) - base;
    return e >= 0 && e < E ? e : -1;
  };
  auto* counts = l.expert_counts.data<int32_t>();
  auto* offs = l.expert_offsets.data<int32_t>();
  std::fill(counts, counts + E, 0);
  for (int64_t i = 0; i < T * k; ++i)
    if (local(i) >= 0) ++counts[local(i)];
  offs[0] = 0;
  for (int64_t e = 0; e < E; ++e) offs[e + 1] = static_cast<int32_t>(offs[e] + round_up(counts[e], a));
  std::fill(l.m_indices.data<int32_t>(), l.m_indices.data<int32_t>() + l.rows_cap, -1);
  std::fill(l.src_token.data<int32_t>(), l.src_token.data<int32_t>() + l.rows_cap, -1);
  std::vector<int32_t> cursor(offs, offs + E);
  for (int64_t i = 0; i < T * k; ++i) {
    const int64_t e = local(i);
    if (e < 0) {
      l.dst_row.data<int32_t>()[i] = -1;
      continue;
    }
    int32_t r = cursor[e]++;
    l.dst_row.data<int32_t>()[i] = r;
    l.m_indices.data<int32_t>()[r] = static_cast<int32_t>(e);
    l.src_token.data<int32_t>()[r] = static_cast<int32_t>(i / k);
  }
}

void moe_permute(const Tensor& x, const MoeLayout& l, Tensor& x_perm) {
  DSA_CHECK(x.defined() && x.dim() == 2 && x.dtype() == DType::BF16 && x.size(0) == l.tokens && x.is_contiguous(),
            "moe_permute: x must be contiguous bf16 [{}][H], got {}", l.tokens, x.defined() ? x.str() : "undefined");
  const int64_t H = x.size(1);
  x_perm.check("moe_permute: x_perm", DType::BF16, {l.rows_cap, H});
  check_layout(l, x.device(), "moe_permute");
  DSA_CHECK(x_perm.device() == x.device() && x_perm.is_contiguous(), "moe_permute: x_perm must be contiguous on {}",
            x.device().str());
  if (x.device().is_cuda()) {
#ifdef DSA_WITH_CUDA
    cuda::moe_permute(x, l, x_perm);
    return;
#else
    fail("moe_permute: no CUDA in this build");
#endif
  }
  for (int64_t r = 0; r < l.rows_cap; ++r) {
    int32_t t = l.src_token.data<int32_t>()[r];
    uint16_t* dst = x_perm.data<uint16_t>() + r * H;
    if (t < 0 || t >= l.tokens)
      std::fill(dst, dst + H, uint16_t{0});
    else
      std::copy(x.data<uint16_t>() + t * H, x.data<uint16_t>() + (t + 1) * H, dst);
  }
}

void moe_combine(const Tensor& y, const MoeLayout& l, const Tensor& w, const Tensor& shared, Tensor& out) {
  DSA_CHECK(y.defined() && y.dim() == 2 && y.dtype() == DType::BF16 && y.size(0) == l.rows_cap && y.is_contiguous(),
            "moe_combine: y must be contiguous bf16 [{}][H], got {}", l.rows_cap, y.defined() ? y.str() : "undefined");
  const int64_t H = y.size(1), T = l.tokens, k = l.topk;
  w.check("moe_combine: topk_weights", DType::F32, {T, k});
  out.check("moe_combine: out", DType::BF16, {T, H});
  if (shared.defined()) shared.check("moe_combine: shared", DType::BF16, {T, H});
  check_layout(l, y.device(), "moe_combine");
  DSA_CHECK(w.device() == y.device() && out.device() == y.device() && (!shared.defined() || shared.device() == y.device()),
            "moe_combine: tensors must be on {}", y.device().str());
  DSA_CHECK(w.is_contiguous() && out.is_contiguous() && (!shared.defined() || shared.is_contiguous()),
            "moe_combine: tensors must be contiguous");
  if (y.device().is_cuda()) {
#ifdef DSA_WITH_CUDA
    cuda::moe_combine(y, l, w, shared, out);
    return;
#else
    fail("moe_combine: no CUDA in this build");
#endif
  }
  std::vector<float> acc(H);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t h = 0; h < H; ++h) acc[h] = shared.defined() ? bf16_bits_to_f32(shared.data<uint16_t>()[t * H + h]) : 0.f;
    for (int64_t s = 0; s < k; ++s) {
      int32_t r = l.dst_row.data<int32_t>()[t * k + s];
      if (r < 0 || r >= l.rows_cap) continue;
      float ws = w.data<float>()[t * k + s];
      for (int64_t h = 0; h < H; ++h) acc[h] += ws * bf16_bits_to_f32(y.data<uint16_t>()[r * H + h]);
    }
    for (int64_t h = 0; h < H; ++h) out.data<uint16_t>()[t * H + h] = f32_to_bf16_bits(acc[h]);
  }
}

}  // namespace dsa::ops
