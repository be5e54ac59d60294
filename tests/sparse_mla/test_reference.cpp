// CPU reference of sparse_mla_decode: hand-computable cases and a brute-force double check.
#include <cmath>
#include <algorithm>
#include <limits>

#include "dsa/core/dtype_conv.h"
#include "common/sparse_mla_problem.h"

namespace dsa::test {
namespace {


struct Out {
  Tensor o, lse;
};
Out run_cpu(const Problem& p) {
  Out r{Tensor::empty({p.form.T, p.form.H, 512}, DType::BF16), Tensor::empty({p.form.T, p.form.H}, DType::F32)};
  poison(r.o);
  poison(r.lse);
  ops::sparse_mla_decode(p.params(Device::cpu(), r.o, r.lse));  // CPU tensors -> reference
  return r;
}

Form single_key(formats::KvFormat kind) {
  Form f;
  f.kind = kind;
  f.H = 16;
  f.T = 1;
  f.main_k = 1;
  f.awkward = false;
  return f;
}

TEST(SparseMlaReference, SingleKeyGivesItsValue) {
  Rng rng;
  for (auto kind : {formats::KvFormat::DsMla, formats::KvFormat::Model1}) {
    Problem p = make_problem(single_key(kind), rng);
    Out r = run_cpu(p);
    const int D = ops::kv_cache_d_qk(kind);
    const int32_t slot = p.main_idx.data<int32_t>()[0];
    const float* v = p.main.truth.data() + static_cast<int64_t>(slot) * D;
    for (int h = 0; h < 16; ++h) {
      for (int d = 0; d < 512; ++d)
        ASSERT_EQ(bf16_bits_to_f32(r.o.data<uint16_t>()[h * 512 + d]), round_to_bf16(v[d]))  // -0 == +0
            << "head " << h << " dim " << d;
      double s = 0;
      for (int d = 0; d < D; ++d) s += static_cast<double>(bf16_bits_to_f32(p.q.data<uint16_t>()[h * D + d])) * v[d];
      EXPECT_NEAR(r.lse.data<float>()[h], s * p.scale, 1e-5 * (1 + std::fabs(s * p.scale)));  // lse = the one score
    }
  }
}

TEST(SparseMlaReference, SinkScalesTheOutputOnly) {
  Rng rng;
  Form f = single_key(formats::KvFormat::Model1);
  f.sink = true;
  Problem p = make_problem(f, rng);
  Out r = run_cpu(p);
  const int32_t slot = p.main_idx.data<int32_t>()[0];
  const float* v = p.main.truth.data() + static_cast<int64_t>(slot) * 512;
  for (int h = 0; h < 16; ++h) {
    const double s = r.lse.data<float>()[h];  // one key: lse = its score (the sink is not in lse)
    const double w = std::exp(s) / (std::exp(s) + std::exp(static_cast<double>(p.sink.data<float>()[h])));
    for (int d = 0; d < 512; ++d)
      EXPECT_NEAR(bf16_bits_to_f32(r.o.data<uint16_t>()[h * 512 + d]), w * v[d], 1e-2 * std::fabs(w * v[d]) + 1e-6);
  }
}

TEST(SparseMlaReference, NoUsableKeyGivesZeroAndMinusInf) {
  Rng rng;
  Form f = single_key(formats::KvFormat::DsMla);
  f.main_k = 3;
  f.sink = true;
  Problem p = make_problem(f, rng);
  p.main_idx.data<int32_t>()[0] = -1;
  p.main_idx.data<int32_t>()[1] = static_cast<int32_t>(p.main.cache.num_slots());  // out of range: skipped
  p.main_idx.data<int32_t>()[2] = -7;
  Out r = run_cpu(p);
  for (int h = 0; h < 16; ++h) {
    for (int d = 0; d < 512; ++d) ASSERT_EQ(r.o.data<uint16_t>()[h * 512 + d], 0);
    EXPECT_EQ(r.lse.data<float>()[h], -std::numeric_limits<float>::infinity());
  }
}

TEST(SparseMlaReference, DuplicatesCountTwice) {
  Rng rng;
  Form f = single_key(formats::KvFormat::DsMla);
  f.main_k = 2;
  Problem p = make_problem(f, rng);
  p.main_idx.data<int32_t>()[1] = p.main_idx.data<int32_t>()[0];
  Out two = run_cpu(p);
  p.main_idx.data<int32_t>()[1] = -1;
  Out one = run_cpu(p);
  for (int h = 0; h < 16; ++h) EXPECT_NEAR(two.lse.data<float>()[h], one.lse.data<float>()[h] + std::log(2.0), 1e-5);
}

TEST(SparseMlaReference, MatchesBruteForce) {
  Rng rng;
  std::vector<Form> forms;
  for (bool pow2 : {true, false}) {
    Form g;
    g.kind = formats::KvFormat::DsMla;
    g.H = 16;
    g.T = 5;
    g.main_k = 70;
    g.pow2 = pow2;
    g.sink = !pow2;
    forms.push_back(g);
  }
  Form v4;
  v4.kind = formats::KvFormat::Model1;
  v4.H = 32;
  v4.T = 4;
  v4.main_page = 64;
  v4.main_k = 40;
  v4.extra = true;
  v4.extra_page = 2;
  v4.extra_k = 33;
  v4.sink = true;
  forms.push_back(v4);
  for (const Form& f : forms) {
    Problem p = make_problem(f, rng);
    Out r = run_cpu(p);
    std::vector<double> o, lse;
    brute_force(p, o, lse);
    // Both sides use the same fp32 dequantized values; only the final bf16 rounding differs.
    EXPECT_TRUE(close_to(r.o, r.lse, o, lse, 1e-6, 1.0 / 256, 1e-6));
  }
}

TEST(SparseMlaReference, ValidateRejectsBadParams) {
  Rng rng;
  Problem p = make_problem(single_key(formats::KvFormat::DsMla), rng);
  Tensor o = Tensor::empty({1, 16, 512}, DType::BF16), lse = Tensor::empty({1, 16}, DType::F32);
  auto expect_error = [&](ops::SparseMlaParams s, const char* what) {
    try {
      s.validate();
      ADD_FAILURE() << "no error for " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  auto s = p.params(Device::cpu(), o, lse);
  EXPECT_NO_THROW(s.validate());
  {
    auto b = s;
    b.q = random_bf16({1, 48, 576}, rng);
    expect_error(b, "H = 48");
  }
  {
    auto b = s;
    b.main.cache.page_size = 48;
    expect_error(b, "page_size = 48");
  }
  {
    auto b = s;
    b.softmax_scale = 0.f;
    expect_error(b, "softmax_scale");
  }
  {
    auto b = s;
    b.main.cache.kind = formats::KvFormat::Model1;
    expect_error(b, "d_qk");
  }
  {
    auto b = s;
    b.sink = random_f32({8}, rng);
    expect_error(b, "sink");
  }
  {
    auto b = s;
    b.o = Tensor::empty({1, 16, 256}, DType::BF16);
    expect_error(b, "o must be");
  }
  {
    auto b = s;
    b.main.cache.data = Tensor::empty({100}, DType::U8);
    expect_error(b, "less than one");
  }
  {
    auto b = s;
    b.main.cache.kind = formats::KvFormat::Indexer;  // key pages of the indexer, not attention's
    expect_error(b, "not an attention cache");
  }
}

TEST(SparseMlaReference, TacticsListAndDefault) {
  Rng rng;
  Form f;
  f.H = 64;
  f.T = 2;
  f.main_k = 2048;
  f.awkward = false;
  Problem p = make_problem(f, rng);
  auto s = p.params(Device::cpu(), Tensor::empty({2, 64, 512}, DType::BF16), Tensor::empty({2, 64}, DType::F32));
  auto tactics = ops::sparse_mla_tactics(s);
  EXPECT_EQ(tactics.size(), 12u);  // {16, 32} heads x {1..32} splits
  auto d = ops::sparse_mla_default_tactic(s, 132);
  EXPECT_EQ(d.heads_per_cta, 32);
  EXPECT_GT(d.splits, 1);  // 2 tokens x 2 head blocks is far below 132 SMs
  EXPECT_NE(std::find(tactics.begin(), tactics.end(), d), tactics.end());

  // Prefill-sized T: splits whose workspace would pass 1 GiB are not offered.
  ops::SparseMlaParams b = s;
  b.q = Tensor::empty({4096, 64, 576}, DType::BF16);
  b.main.indices = Tensor::empty({4096, 2048}, DType::I32);
  b.o = Tensor::empty({4096, 64, 512}, DType::BF16);
  b.lse = Tensor::empty({4096, 64}, DType::F32);
  // 4096 x 64 x 2 splits x 513 floats = 1.0002 GiB: already over.
  for (const auto& t : ops::sparse_mla_tactics(b)) EXPECT_EQ(t.splits, 1) << t.name();
  EXPECT_EQ(ops::sparse_mla_default_tactic(b, 132).splits, 1);
}

}  // namespace
}  // namespace dsa::test
