// Contiguous MoE layout, permutation and combine: CPU properties and CUDA vs CPU.
#include <algorithm>
#include <set>
#include <utility>

#include "common/testing.h"
#include "dsa/core/dtype_conv.h"
#include "dsa/ops/moe/layout.h"
#include "moe/moe_util.h"

using namespace dsa;
using namespace dsa::ops;
using namespace dsa::test;

namespace {

// ids with -1 holes; mode 0 random, 1 all tokens to one expert, 2 only even experts (empty odd)
Tensor make_ids(int64_t T, int64_t k, int64_t E, Rng& rng, int mode) {
  Tensor ids = Tensor::empty({T, k}, DType::I32);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t s = 0; s < k; ++s) {
      int32_t e;
      if (mode == 1) e = s == 0 ? 3 : static_cast<int32_t>(rng.randint(0, E - 1));
      else if (mode == 2) e = static_cast<int32_t>(2 * rng.randint(0, E / 2 - 1));
      else e = static_cast<int32_t>(rng.randint(0, E - 1));
      if (rng.randint(0, 19) == 0) e = -1;
      ids.data<int32_t>()[t * k + s] = e;
    }
  return ids;
}

// Checks every invariant of a host layout against the (global) ids; ids outside the layout's
// experts [expert_base, expert_base + E) must be dropped.
void check_layout(const MoeLayout& l, const Tensor& ids) {
  const int64_t E = l.experts, T = l.tokens, k = l.topk;
  auto local = [&](int64_t i) -> int32_t {
    const int64_t e = ids.data<int32_t>()[i] - l.expert_base;
    return e >= 0 && e < E ? static_cast<int32_t>(e) : -1;
  };
  const int32_t* off = l.expert_offsets.data<int32_t>();
  const int32_t* cnt = l.expert_counts.data<int32_t>();
  std::vector<int32_t> want(E, 0);
  for (int64_t i = 0; i < T * k; ++i)
    if (local(i) >= 0) ++want[local(i)];
  ASSERT_EQ(off[0], 0);
  for (int64_t e = 0; e < E; ++e) {
    ASSERT_EQ(cnt[e], want[e]) << "expert " << e;
    ASSERT_EQ(off[e + 1] - off[e], (want[e] + l.alignment - 1) / l.alignment * l.alignment);
  }
  ASSERT_LE(off[E], l.rows_cap);
  std::set<int32_t> used;
  for (int64_t i = 0; i < T * k; ++i) {
    const int32_t e = local(i), r = l.dst_row.data<int32_t>()[i];
    if (e < 0) {
      ASSERT_EQ(r, -1);
      continue;
    }
    ASSERT_GE(r, off[e]);
    ASSERT_LT(r, off[e] + cnt[e]);
    ASSERT_TRUE(used.insert(r).second) << "row used twice";
    ASSERT_EQ(l.m_indices.data<int32_t>()[r], e);
    ASSERT_EQ(l.src_token.data<int32_t>()[r], i / k);
  }
  for (int64_t r = 0; r < l.rows_cap; ++r)
    if (!used.count(static_cast<int32_t>(r))) {
      ASSERT_EQ(l.m_indices.data<int32_t>()[r], -1);
      ASSERT_EQ(l.src_token.data<int32_t>()[r], -1);
    }
}

MoeLayout to_host(const MoeLayout& l) {
  MoeLayout h = l;
  h.expert_offsets = l.expert_offsets.to(Device::cpu());
  h.expert_counts = l.expert_counts.to(Device::cpu());
  h.m_indices = l.m_indices.to(Device::cpu());
  h.src_token = l.src_token.to(Device::cpu());
  h.dst_row = l.dst_row.to(Device::cpu());
  return h;
}

}  // namespace

TEST(MoeLayout, UpperBoundMatchesReferenceExample) {
  EXPECT_EQ(moe_rows_upper_bound(1, 6, 256, 64), 384);
  EXPECT_EQ(moe_rows_upper_bound(4096, 8, 256, 128), (32768 + 256 * 127 + 127) / 128 * 128);
  EXPECT_EQ(moe_rows_upper_bound(0, 6, 256, 64), 0);
}

TEST(MoeLayout, CpuInvariants) {
  Rng rng;
  for (int64_t T : {1, 7, 64, 1000})
    for (int mode : {0, 1, 2})
      for (int64_t a : {16, 64}) {
        const int64_t k = 6, E = 32;
        Tensor ids = make_ids(T, k, E, rng, mode);
        MoeLayout l = make_moe_layout(T, k, E, a, Device::cpu());
        build_moe_layout(ids, l);
        check_layout(l, ids);
      }
}

// Expert parallelism: a layout of experts [base, base + E) of 32 takes only their slots, and the
// parts' layouts together hold every slot exactly once.
TEST(MoeLayout, ExpertPartsTakeTheirSlotsOnly) {
  Rng rng;
  for (int64_t T : {1, 7, 300})
    for (int mode : {0, 1}) {
      const int64_t k = 6, E_all = 32;
      Tensor ids = make_ids(T, k, E_all, rng, mode);
      int64_t held = 0, valid = 0;
      for (int64_t i = 0; i < T * k; ++i) valid += ids.data<int32_t>()[i] >= 0;
      for (const auto& [base, E] : {std::pair<int64_t, int64_t>{0, 12}, {12, 20}}) {
        MoeLayout l = make_moe_layout(T, k, E, 16, Device::cpu());
        l.expert_base = base;
        build_moe_layout(ids, l);
        check_layout(l, ids);
        for (int64_t i = 0; i < T * k; ++i) held += l.dst_row.data<int32_t>()[i] >= 0;
      }
      EXPECT_EQ(held, valid) << "T=" << T << " mode " << mode;
    }
}

TEST(MoeLayout, PermuteThenCombineIsWeightedSum) {
  Rng rng;
  const int64_t T = 7, k = 3, E = 5, H = 16;
  Tensor ids = make_ids(T, k, E, rng, 0);
  MoeLayout l = make_moe_layout(T, k, E, 16, Device::cpu());
  build_moe_layout(ids, l);
  Tensor x = random_bf16({T, H}, rng), xp = Tensor::empty({l.rows_cap, H}, DType::BF16);
  poison(xp);
  moe_permute(x, l, xp);
  Tensor w = random_f32({T, k}, rng), sh = random_bf16({T, H}, rng), out = Tensor::empty({T, H}, DType::BF16);
  moe_combine(xp, l, w, sh, out);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      float want = bf(sh, t * H + h);
      for (int64_t s = 0; s < k; ++s)
        if (ids.data<int32_t>()[t * k + s] >= 0) want += w.data<float>()[t * k + s] * bf(x, t * H + h);
      EXPECT_NEAR(bf(out, t * H + h), want, 1e-2 * std::fabs(want) + 1e-3);
    }
  for (int64_t r = 0; r < l.rows_cap; ++r)
    if (l.src_token.data<int32_t>()[r] < 0) {
      EXPECT_EQ(bf(xp, r * H), 0.f);
    }
}

TEST(MoeLayoutCuda, InvariantsPermuteCombine) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  const Device d = Device::cuda();
  for (int64_t T : {1, 7, 64, 1000})
    for (int mode : {0, 1, 2}) {
      const int64_t k = 6, E = 256, H = 64;
      Tensor ids = make_ids(T, k, E, rng, mode);
      MoeLayout l = make_moe_layout(T, k, E, 64, d);
      poison(l.m_indices);
      build_moe_layout(ids.to(d), l);
      MoeLayout h = to_host(l);
      check_layout(h, ids);
      Tensor x = random_bf16({T, H}, rng);
      Tensor xp = Tensor::empty({l.rows_cap, H}, DType::BF16, d);
      poison(xp);
      moe_permute(x.to(d), l, xp);
      Tensor xpc = Tensor::empty({l.rows_cap, H}, DType::BF16);
      moe_permute(x, h, xpc);
      ASSERT_EQ(compare_bf16(xp.to(Device::cpu()), xpc, 0, 0, "permute"), 0);
      Tensor w = random_f32({T, k}, rng), sh = random_bf16({T, H}, rng);
      Tensor og = Tensor::empty({T, H}, DType::BF16, d), oc = Tensor::empty({T, H}, DType::BF16);
      poison(og);
      moe_combine(xp, l, w.to(d), sh.to(d), og);
      moe_combine(xpc, h, w, sh, oc);
      ASSERT_EQ(compare_bf16(og.to(Device::cpu()), oc, 1e-2, 1e-3, "combine"), 0);
    }
}

TEST(MoeLayoutCuda, ExpertPartsEqualTheCpu) {
  DSA_REQUIRE_CUDA();
  Rng rng;
  const Device d = Device::cuda();
  for (int64_t T : {1, 7, 1000})
    for (const auto& [base, E] : {std::pair<int64_t, int64_t>{0, 100}, {100, 156}, {255, 1}}) {
      const int64_t k = 6, E_all = 256;
      Tensor ids = make_ids(T, k, E_all, rng, 0);
      MoeLayout l = make_moe_layout(T, k, E, 64, d);
      l.expert_base = base;
      poison(l.m_indices);
      poison(l.dst_row);
      build_moe_layout(ids.to(d), l);
      check_layout(to_host(l), ids);
    }
}
