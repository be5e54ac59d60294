// The rejection-sampling rule of speculative decoding (engine/rejection_sampling.h) on synthetic
// target / draft distributions over 10 ids: over 200k trials (fixed seeds) the emitted token's
// empirical distribution is within total variation 0.01 of p (for 200k draws over 10 ids the
// expected TV is about 0.003) and the acceptance rate within 0.005 of sum_x min(p, q) (its
// standard deviation is at most 0.0012), for q = p, q disjoint from p, q a point mass (inside
// and outside p's support), q cut by top_k, and p cut by top_p; a rule that draws the
// correction from p instead of the residual fails the same bound (the test can tell); and the
// span verifier (rejection_accept) on hand-made rows: accepted prefix, correction, bonus.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "dsa/core/error.h"
#include "dsa/engine/rejection_sampling.h"
#include "dsa/engine/sequence.h"
#include "dsa/engine/speculative.h"
#include "dsa/ops/sampling/sampling.h"

namespace dsa::engine {
namespace {

using Dist = std::vector<float>;
constexpr int64_t kV = 10;
constexpr int kTrials = 200000;

Dist probs(const std::vector<float>& logits, float temperature, int top_k = 0, float top_p = 1.f) {
  ops::SamplingRow r;
  r.temperature = temperature;
  r.top_k = top_k;
  r.top_p = top_p;
  Dist p(logits.size());
  EXPECT_TRUE(ops::sampling_probs(logits.data(), static_cast<int64_t>(logits.size()), r, p.data()));
  return p;
}

Dist normalised(std::vector<float> w) {
  double z = 0;
  for (float x : w) z += x;
  for (float& x : w) x = static_cast<float>(x / z);
  return w;
}

double tv(const std::vector<double>& a, const Dist& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += std::abs(a[i] - b[i]);
  return s / 2;
}

struct Trial {
  std::vector<double> emitted;  // empirical distribution of the emitted token
  double acceptance = 0;
};

// `correct` maps a rejected trial's verdict to the token emitted (the rule's own by default).
Trial run(const Dist& p, const Dist& q, uint64_t seed,
          const std::function<int32_t(const RejectionVerdict&, uint64_t)>& correct = nullptr) {
  Trial t;
  t.emitted.assign(p.size(), 0.0);
  int64_t accepted = 0;
  for (uint64_t i = 0; i < kTrials; ++i) {
    const int32_t d = draw_from(q, spec_uniform(seed, i, SpecDraw::Draft));
    EXPECT_GE(d, 0);
    EXPECT_GT(q[static_cast<size_t>(d)], 0.f) << "drew outside q's support";
    RejectionVerdict v =
        rejection_verdict(p, q, d, spec_uniform(seed, i, SpecDraw::Accept), spec_uniform(seed, i, SpecDraw::Residual));
    if (v.accepted) ++accepted;
    else if (correct) v.token = correct(v, i);
    EXPECT_GE(v.token, 0);
    t.emitted[static_cast<size_t>(v.token)] += 1.0 / kTrials;
  }
  t.acceptance = static_cast<double>(accepted) / kTrials;
  return t;
}

double overlap(const Dist& p, const Dist& q) {
  double s = 0;
  for (size_t i = 0; i < p.size(); ++i) s += std::min(p[i], q[i]);
  return s;
}

const std::vector<float> kLogitsP{1.2f, 0.3f, -0.4f, 2.0f, 0.9f, -1.5f, 0.1f, 1.6f, -0.2f, 0.5f};
const std::vector<float> kLogitsQ{0.1f, 1.8f, 0.4f, 1.1f, -0.6f, 0.7f, 2.2f, -1.0f, 0.3f, 0.0f};

TEST(SpeculativeRejection, EmittedTokensFollowTheTargetDistribution) {
  const Dist p = probs(kLogitsP, 1.f);
  struct Case {
    std::string name;
    Dist p, q;
  };
  const std::vector<Case> cases{
      {"q = p", p, p},
      {"q another softmax", p, probs(kLogitsQ, 0.7f)},
      {"q disjoint from p", normalised({3, 1, 2, 4, 1, 0, 0, 0, 0, 0}), normalised({0, 0, 0, 0, 0, 2, 1, 1, 3, 1})},
      {"q a point mass in p's support", p, Dist{0, 0, 0, 0, 0, 0, 1, 0, 0, 0}},
      {"q a point mass outside p's support", probs(kLogitsP, 1.f, 3), Dist{0, 1, 0, 0, 0, 0, 0, 0, 0, 0}},
      {"q cut by top_k 3", p, probs(kLogitsQ, 1.f, 3)},
      {"p cut by top_p 0.6, q full", probs(kLogitsP, 0.8f, 0, 0.6f), probs(kLogitsQ, 1.3f)},
  };
  uint64_t seed = 100;
  for (const Case& c : cases) {
    const Trial t = run(c.p, c.q, ++seed);
    const double d = tv(t.emitted, c.p), want = overlap(c.p, c.q);
    std::printf("%-36s seed %llu: TV(emitted, p) = %.4f; acceptance %.4f, sum min(p, q) = %.4f\n", c.name.c_str(),
                static_cast<unsigned long long>(seed), d, t.acceptance, want);
    EXPECT_LT(d, 0.01) << c.name;
    EXPECT_NEAR(t.acceptance, want, 0.005) << c.name;
  }
}

// The same bound rejects a rule that is almost right: the correction drawn from p rather than
// from norm(max(0, p - q)) over-weights the tokens q already proposes.
TEST(SpeculativeRejection, TheBoundTellsAWrongCorrection) {
  const Dist p = probs(kLogitsP, 1.f), q = probs(kLogitsQ, 1.f, 3);
  const Trial wrong = run(p, q, 7, [&](const RejectionVerdict&, uint64_t i) {
    return draw_from(p, spec_uniform(7, i, SpecDraw::Residual));
  });
  const double d = tv(wrong.emitted, p);
  std::printf("correction from p instead of the residual: TV(emitted, p) = %.4f\n", d);
  EXPECT_GT(d, 0.05);
}

TEST(SpeculativeRejection, DrawsAndVerdictsOnHandMadeRows) {
  const Dist p{0.f, 0.25f, 0.f, 0.75f};
  EXPECT_EQ(draw_from(p, 0.1f), 1);
  EXPECT_EQ(draw_from(p, 0.2499f), 1);
  EXPECT_EQ(draw_from(p, 0.2501f), 3);
  EXPECT_EQ(draw_from(p, 0.9999999f), 3);
  EXPECT_EQ(draw_from(Dist{0.f, 0.f}, 0.5f), -1);
  const Dist q{0.f, 0.5f, 0.f, 0.5f};
  EXPECT_TRUE(rejection_verdict(p, q, 3, 0.999f, 0.5f).accepted);  // p(3) >= q(3): always
  EXPECT_TRUE(rejection_verdict(p, q, 1, 0.49f, 0.5f).accepted);   // p / q = 0.5
  const RejectionVerdict r = rejection_verdict(p, q, 1, 0.51f, 0.01f);
  EXPECT_FALSE(r.accepted);
  EXPECT_EQ(r.token, 3);  // max(0, p - q) is all on 3
  EXPECT_FALSE(rejection_verdict(p, q, 0, 0.01f, 0.5f).accepted);  // p(0) = 0: never
  EXPECT_TRUE(rejection_verdict(p, Dist{0.f, 0.f, 1.f, 0.f}, 1, 0.9f, 0.5f).accepted);  // q(1) = 0 (forced), p > 0
  const RejectionVerdict same = rejection_verdict(p, p, 0, 0.5f, 0.9f);  // empty residual: p's draw
  EXPECT_FALSE(same.accepted);
  EXPECT_EQ(same.token, 3);
  EXPECT_THROW(rejection_verdict(p, q, 4, 0.5f, 0.5f), Error);
  EXPECT_THROW(rejection_verdict(p, Dist{1.f}, 0, 0.5f, 0.5f), Error);
  // Seeded: the same (seed, position) gives the same number; the three draws and positions differ.
  EXPECT_EQ(spec_uniform(3, 10, SpecDraw::Accept), spec_uniform(3, 10, SpecDraw::Accept));
  EXPECT_NE(spec_uniform(3, 10, SpecDraw::Accept), spec_uniform(3, 10, SpecDraw::Draft));
  EXPECT_NE(spec_uniform(3, 10, SpecDraw::Accept), spec_uniform(3, 10, SpecDraw::Residual));
  EXPECT_NE(spec_uniform(3, 10, SpecDraw::Accept), spec_uniform(3, 11, SpecDraw::Accept));
  EXPECT_NE(spec_uniform(3, 10, SpecDraw::Accept), spec_uniform(4, 10, SpecDraw::Accept));
}

// rejection_accept over a span: draft j is judged against row j processed by the request's rules
// (top_k 2 here), the first rejection ends the span with a residual draw, all accepted ends it
// with the target's own draw of row D (the bonus); a non-finite row ends it with -1.
TEST(SpeculativeRejection, SpanAcceptsAPrefixThenCorrectsOrAddsTheBonus) {
  constexpr int64_t V = 4;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  Sequence s;
  s.tokens = {2, 3, 1};
  s.params.temperature = 1.0;
  s.params.top_k = 2;
  s.seed = 11;
  s.draft_q = {Dist{0, 1, 0, 0}, Dist{0, 0, 1, 0}, Dist{0.25f, 0.25f, 0.25f, 0.25f}};
  // Row 0 puts everything on 1 (top_k 2 keeps 1 and 3; 3 is 30 below): draft 1 is accepted.
  // Row 1 keeps 0 and 3 only (top_k 2): draft 2 has p = 0 and is rejected; the residual is p.
  const std::vector<std::vector<float>> rows{{0, 40, kNegInf, 10}, {5, kNegInf, 0, 5}, {1, 1, 1, 1}};
  auto logits = [&](int j) { return rows.at(static_cast<size_t>(j)).data(); };
  std::vector<int32_t> picks;
  const std::vector<int32_t> drafts{1, 2};
  EXPECT_EQ(rejection_accept(s, drafts, std::vector<int32_t>{1, 0, 3}, logits, V, picks), 1);
  ASSERT_EQ(picks.size(), 2u);
  EXPECT_EQ(picks[0], 1);
  EXPECT_TRUE(picks[1] == 0 || picks[1] == 3) << picks[1];
  // The same call gives the same picks (seeded by position).
  std::vector<int32_t> again;
  rejection_accept(s, drafts, std::vector<int32_t>{1, 0, 3}, logits, V, again);
  EXPECT_EQ(again, picks);
  // One draft, accepted: the bonus is target[1].
  picks.clear();
  EXPECT_EQ(rejection_accept(s, std::vector<int32_t>{1}, std::vector<int32_t>{1, 3}, logits, V, picks), 1);
  EXPECT_EQ(picks, (std::vector<int32_t>{1, 3}));
  // A NaN row: -1 at that position.
  const std::vector<float> nan_row{0, std::numeric_limits<float>::quiet_NaN(), 0, 0};
  picks.clear();
  EXPECT_EQ(rejection_accept(s, std::vector<int32_t>{1}, std::vector<int32_t>{1, 3},
                             [&](int) { return nan_row.data(); }, V, picks),
            0);
  EXPECT_EQ(picks, (std::vector<int32_t>{-1}));
  // Drafts without their distributions, or rows that do not match: errors.
  s.draft_q.resize(1);
  EXPECT_THROW(rejection_accept(s, drafts, std::vector<int32_t>{1, 0, 3}, logits, V, picks), Error);
  EXPECT_THROW(rejection_accept(s, std::vector<int32_t>{1}, std::vector<int32_t>{1}, logits, V, picks), Error);
}

}  // namespace
}  // namespace dsa::engine
