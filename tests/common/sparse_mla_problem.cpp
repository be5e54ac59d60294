#include "common/sparse_mla_problem.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "dsa/core/dtype_conv.h"
#include "dsa/formats/kv_layout.h"
#include "dsa/ops/sparse_mla/random_cache.h"

namespace dsa::test {


CacheData make_cache(formats::KvFormat kind, int page_size, int requests, int ctx, bool pow2_scales, Rng& rng) {
  CacheData c;
  c.requests = requests;
  c.ctx = ctx;
  const int blocks = (ctx + page_size - 1) / page_size;
  const int pages = requests * blocks + 3;  // a few spare (unused) pages
  c.cache.kind = kind;
  c.cache.page_size = page_size;
  const size_t page_bytes = formats::kv_page_bytes(kind, page_size);
  c.cache.data = random_bytes({static_cast<int64_t>(page_bytes * pages)}, DType::U8, rng);  // padding = garbage
  std::vector<int32_t> perm(pages);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng.gen());
  c.table.assign(requests, std::vector<int32_t>(blocks));
  for (int r = 0; r < requests; ++r)
    for (int b = 0; b < blocks; ++b) c.table[r][b] = perm[r * blocks + b];

  const int64_t slots = static_cast<int64_t>(pages) * page_size;
  c.truth.assign(slots * ops::kv_cache_d_qk(kind), 0.f);
  ops::fill_random_kv_pages(kind, page_size, c.cache.data.data<uint8_t>(), pages,
                            pow2_scales ? ops::RandomKvScales::Pow2 : ops::RandomKvScales::Any, rng.gen(),
                            c.truth.data());
  return c;
}

namespace {

// Index rows for T tokens over cache c: random positions of the token's request, then (when
// awkward) -1 entries, duplicates, out-of-range slots, partial lengths and empty rows.
void make_indices(const CacheData& c, const std::vector<int>& token_req, int K, bool awkward, Rng& rng, Tensor& idx,
                  Tensor& len) {
  const int64_t T = static_cast<int64_t>(token_req.size());
  idx = Tensor::empty({T, K}, DType::I32);
  len = Tensor::empty({T}, DType::I32);
  const int64_t num_slots = c.cache.num_slots();
  for (int64_t t = 0; t < T; ++t) {
    int32_t* row = idx.data<int32_t>() + t * K;
    for (int k = 0; k < K; ++k) row[k] = c.slot_of(token_req[t], static_cast<int>(rng.randint(0, c.ctx - 1)));
    int32_t n = K;
    if (awkward) {
      for (int k = 0; k < K; ++k) {
        const float u = rng.uniform();
        if (u < 0.08f) row[k] = -1;
        else if (u < 0.12f && k > 0) row[k] = row[rng.randint(0, k - 1)];  // duplicate
        else if (u < 0.14f) row[k] = static_cast<int32_t>(num_slots + rng.randint(0, 1000));  // out of range
        else if (u < 0.15f) row[k] = -static_cast<int32_t>(rng.randint(2, 100));  // other negatives
      }
      const float u = rng.uniform();
      if (u < 0.3f) n = static_cast<int32_t>(rng.randint(0, K));
      if (T > 1 && t == T - 1) n = 0;                                        // an empty row
      if (T > 2 && t == 1) std::fill(row, row + K, -1);                      // a row of -1 only
    }
    len.data<int32_t>()[t] = n;
  }
}

}  // namespace

Problem make_problem(const Form& f, Rng& rng) {
  Problem p;
  p.form = f;
  const int D = ops::kv_cache_d_qk(f.kind);
  const int requests = static_cast<int>(std::min<int64_t>(f.T, 3));
  p.main = make_cache(f.kind, f.main_page, requests, std::max(f.main_k + f.main_k / 4, 96), f.pow2, rng);
  std::vector<int> token_req(f.T);
  for (auto& r : token_req) r = static_cast<int>(rng.randint(0, requests - 1));
  make_indices(p.main, token_req, f.main_k, f.awkward, rng, p.main_idx, p.main_len);
  if (f.extra) {
    p.extra = make_cache(f.kind, f.extra_page, requests, std::max(f.extra_k + f.extra_k / 4, 16), f.pow2, rng);
    make_indices(p.extra, token_req, f.extra_k, f.awkward, rng, p.extra_idx, p.extra_len);
    if (f.awkward && f.T > 1) p.extra_len.data<int32_t>()[f.T - 1] = 0;  // keep the empty row empty
  }
  p.q = random_bf16({f.T, f.H, D}, rng);
  if (f.sink) p.sink = random_f32({f.H}, rng, 1.5f);
  p.scale = 1.f / std::sqrt(static_cast<float>(D));
  return p;
}

ops::SparseMlaParams Problem::params(Device dev, Tensor o, Tensor lse) const {
  ops::SparseMlaParams s;
  s.q = q.to(dev);
  s.main.cache = main.cache;
  s.main.cache.data = main.cache.data.to(dev);
  s.main.indices = main_idx.to(dev);
  if (form.awkward) s.main.lengths = main_len.to(dev);
  if (form.extra) {
    ops::SparseKeyList e;
    e.cache = extra.cache;
    e.cache.data = extra.cache.data.to(dev);
    e.indices = extra_idx.to(dev);
    if (form.awkward) e.lengths = extra_len.to(dev);
    s.extra = e;
  }
  if (sink.defined()) s.sink = sink.to(dev);
  s.softmax_scale = scale;
  s.o = o;
  s.lse = lse;
  return s;
}

void brute_force(const Problem& p, std::vector<double>& o, std::vector<double>& lse, std::vector<double>* o_abs,
                 std::vector<double>* s_abs) {
  const auto& f = p.form;
  const int D = ops::kv_cache_d_qk(f.kind);
  o.assign(f.T * f.H * 512, 0.0);
  if (o_abs) o_abs->assign(f.T * f.H * 512, 0.0);
  if (s_abs) s_abs->assign(f.T * f.H, 0.0);
  lse.assign(f.T * f.H, 0.0);
  for (int64_t t = 0; t < f.T; ++t) {
    std::vector<const float*> rows;
    auto add = [&](const CacheData& c, const Tensor& idx, const Tensor& len) {
      const int64_t K = idx.size(1);
      const int64_t n = f.awkward ? std::clamp<int64_t>(len.data<int32_t>()[t], 0, K) : K;
      for (int64_t k = 0; k < n; ++k) {
        const int32_t s = idx.data<int32_t>()[t * K + k];
        if (s >= 0 && s < c.cache.num_slots()) rows.push_back(c.truth.data() + static_cast<int64_t>(s) * D);
      }
    };
    add(p.main, p.main_idx, p.main_len);
    if (f.extra) add(p.extra, p.extra_idx, p.extra_len);
    for (int h = 0; h < f.H; ++h) {
      const uint16_t* qh = p.q.data<uint16_t>() + (t * f.H + h) * D;
      double* oh = o.data() + (t * f.H + h) * 512;
      if (rows.empty()) {
        lse[t * f.H + h] = -std::numeric_limits<double>::infinity();
        continue;
      }
      std::vector<double> s(rows.size());
      for (size_t j = 0; j < rows.size(); ++j) {
        double acc = 0;
        double acc_abs = 0;
        for (int d = 0; d < D; ++d) {
          const double x = static_cast<double>(bf16_bits_to_f32(qh[d])) * rows[j][d];
          acc += x;
          acc_abs += std::fabs(x);
        }
        s[j] = acc * p.scale;
        if (s_abs) (*s_abs)[t * f.H + h] = std::max((*s_abs)[t * f.H + h], acc_abs * p.scale);
      }
      const double m = *std::max_element(s.begin(), s.end());
      double l = 0;
      for (double x : s) l += std::exp(x - m);
      double denom = l + (f.sink ? std::exp(static_cast<double>(p.sink.data<float>()[h]) - m) : 0.0);
      for (size_t j = 0; j < rows.size(); ++j) {
        const double w = std::exp(s[j] - m) / denom;
        for (int d = 0; d < 512; ++d) oh[d] += w * rows[j][d];
        if (o_abs)
          for (int d = 0; d < 512; ++d) (*o_abs)[(t * f.H + h) * 512 + d] += w * std::fabs(rows[j][d]);
      }
      lse[t * f.H + h] = m + std::log(l);
    }
  }
}

std::vector<double> to_double(const Tensor& t0) {
  Tensor t = t0.to(Device::cpu());
  std::vector<double> v(t.numel());
  for (int64_t i = 0; i < t.numel(); ++i)
    v[i] = t.dtype() == DType::BF16 ? bf16_bits_to_f32(t.data<uint16_t>()[i]) : t.data<float>()[i];
  return v;
}

::testing::AssertionResult close_to(const Tensor& o, const Tensor& lse, const std::vector<double>& o_ref,
                                    const std::vector<double>& lse_ref, double o_atol, double o_rtol, double lse_atol,
                                    const std::vector<double>* o_abs, double abs_rtol,
                                    const std::vector<double>* s_abs, double s_rtol) {
  auto ov = to_double(o), lv = to_double(lse);
  if (ov.size() != o_ref.size() || lv.size() != lse_ref.size()) return ::testing::AssertionFailure() << "size mismatch";
  int bad = 0;
  double worst = 0;
  auto fail = ::testing::AssertionFailure();
  for (size_t i = 0; i < ov.size(); ++i) {
    const double err = std::fabs(ov[i] - o_ref[i]);
    const double tol = o_atol + o_rtol * std::fabs(o_ref[i]) + (o_abs ? abs_rtol * (*o_abs)[i] : 0.0);
    const bool ok = std::isfinite(ov[i]) && err <= tol;
    worst = std::max(worst, std::isfinite(err) ? err : 1e30);
    if (!ok && bad++ < 8) fail << "o[" << i << "] (row " << i / 512 << ", col " << i % 512 << ") = " << ov[i] << " vs " << o_ref[i] << "\n";
  }
  for (size_t i = 0; i < lv.size(); ++i) {
    bool ok;
    if (std::isinf(lse_ref[i]) && lse_ref[i] < 0)
      ok = std::isinf(lv[i]) && lv[i] < 0;
    else
      ok = std::isfinite(lv[i]) && std::fabs(lv[i] - lse_ref[i]) <=
                                       lse_atol * (1.0 + std::fabs(lse_ref[i])) + (s_abs ? s_rtol * (*s_abs)[i] : 0.0);
    if (!ok && bad++ < 16) fail << "lse[" << i << "] = " << lv[i] << " vs " << lse_ref[i] << "\n";
  }
  if (bad) return fail << bad << " mismatches (max |o err| " << worst << ")";
  return ::testing::AssertionSuccess() << "max |o err| " << worst;
}

// ---- the small GLM problem of the attention and tuning tests ----
SparseMlaProblem make_glm_sparse_mla_problem(int T, int H, Rng& rng) {
  Form f;
  f.kind = formats::KvFormat::DsMla;
  f.H = H;
  f.T = T;
  f.main_page = 64;
  f.main_k = 64;
  const Problem problem = make_problem(f, rng);
  SparseMlaProblem pr;
  Tensor o = Tensor::empty({T, H, 512}, DType::BF16), lse = Tensor::empty({T, H}, DType::F32);
  poison(o);
  poison(lse);
  pr.p = problem.params(Device::cpu(), o, lse);  // host views of the problem's tensors
  pr.o_ref = Tensor::empty({T, H, 512}, DType::BF16);
  pr.lse_ref = Tensor::empty({T, H}, DType::F32);
  ops::SparseMlaParams r = pr.p;
  r.o = pr.o_ref;
  r.lse = pr.lse_ref;
  ops::sparse_mla_reference(r);
  return pr;
}

ops::SparseMlaParams sparse_mla_on_cuda(const ops::SparseMlaParams& p) {
  auto on = [](const Tensor& t) { return t.defined() ? t.to(Device::cuda()) : t; };
  ops::SparseMlaParams g = p;
  g.q = on(p.q);
  g.main.cache.data = on(p.main.cache.data);
  g.main.indices = on(p.main.indices);
  g.main.lengths = on(p.main.lengths);
  if (p.extra) {
    g.extra->cache.data = on(p.extra->cache.data);
    g.extra->indices = on(p.extra->indices);
    g.extra->lengths = on(p.extra->lengths);
  }
  g.sink = on(p.sink);
  g.o = Tensor::empty(p.o.shape(), DType::BF16, Device::cuda());
  g.lse = Tensor::empty(p.lse.shape(), DType::F32, Device::cuda());
  poison(g.o);
  poison(g.lse);
  return g;
}

void expect_matches_sparse_mla_reference(const ops::SparseMlaParams& run, const SparseMlaProblem& pr) {
  const Tensor o = run.o.to(Device::cpu()), lse = run.lse.to(Device::cpu());  // no-op copies on the host
  for (int64_t i = 0; i < o.numel(); ++i) {
    const float a = bf16_bits_to_f32(o.data<uint16_t>()[i]), b = bf16_bits_to_f32(pr.o_ref.data<uint16_t>()[i]);
    ASSERT_FALSE(std::isnan(a)) << i;
    ASSERT_NEAR(a, b, 2e-2f + 2e-2f * std::fabs(b)) << i;
  }
  for (int64_t i = 0; i < lse.numel(); ++i) {
    const float a = lse.data<float>()[i], b = pr.lse_ref.data<float>()[i];
    if (std::isinf(b)) {
      ASSERT_EQ(a, b) << i;
      continue;
    }
    ASSERT_FALSE(std::isnan(a)) << i;
    ASSERT_NEAR(a, b, 1e-3f + 1e-3f * std::fabs(b)) << i;
  }
}

}  // namespace dsa::test
