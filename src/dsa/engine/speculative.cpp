#include "dsa/engine/speculative.h"

#include <algorithm>

#include "dsa/core/error.h"
#include "dsa/engine/rejection_sampling.h"
#include "dsa/engine/sampler.h"
#include "dsa/engine/tp_ranks.h"
#include "dsa/ops/sampling/sampling.h"

namespace dsa::engine {

SpecAcceptance parse_spec_acceptance(std::string_view name) {
  if (name == "rejection") return SpecAcceptance::Rejection;
  if (name == "exact") return SpecAcceptance::Exact;
  fail("--speculative-acceptance must be 'rejection' or 'exact', got '{}'", name);
}

const char* spec_acceptance_name(SpecAcceptance a) { return a == SpecAcceptance::Exact ? "exact" : "rejection"; }

int rejection_accept(const Sequence& s, std::span<const int32_t> drafts, std::span<const int32_t> target,
                     const std::function<const float*(int)>& target_logits, int64_t vocab, std::vector<int32_t>& picks) {
  const size_t D = drafts.size();
  DSA_CHECK(target.size() == D + 1 && s.draft_q.size() >= D,
            "speculative: {} verified rows and {} draft distributions for {} drafts (need drafts + 1 and drafts)",
            target.size(), s.draft_q.size(), D);
  std::vector<float> p(static_cast<size_t>(vocab));
  for (size_t j = 0; j < D; ++j) {
    const uint64_t pos = s.tokens.size() + j;
    if (!ops::sampling_probs(target_logits(static_cast<int>(j)), vocab, sampling_row(s.params, s.seed, pos), p.data())) {
      picks.push_back(-1);
      return static_cast<int>(j);
    }
    const RejectionVerdict v = rejection_verdict(p, s.draft_q[j], drafts[j], spec_uniform(s.seed, pos, SpecDraw::Accept),
                                                 spec_uniform(s.seed, pos, SpecDraw::Residual));
    picks.push_back(v.token);
    if (!v.accepted) return static_cast<int>(j);
  }
  picks.push_back(target[D]);
  return static_cast<int>(D);
}

int accepted_prefix(std::span<const int32_t> drafts, std::span<const int32_t> target) {
  DSA_CHECK(target.size() == drafts.size() + 1, "speculative: {} verified rows for {} drafts (need drafts + 1)",
            target.size(), drafts.size());
  int a = 0;
  while (static_cast<size_t>(a) < drafts.size() && target[static_cast<size_t>(a)] >= 0 &&
         drafts[static_cast<size_t>(a)] == target[static_cast<size_t>(a)])
    ++a;
  return a;
}

bool rollback_needs_state(const std::vector<kv::CacheGroupSpec>& groups, int64_t keep, int64_t end) {
  for (const kv::CacheGroupSpec& g : groups) {
    if (g.ratio <= 1) continue;
    // Is there a p in [keep, end) with (p + 1) % ratio == 0? The first such p + 1 is the first
    // multiple of ratio above keep.
    const int64_t first_close = (keep / g.ratio + 1) * g.ratio - 1;
    if (first_close < end) return true;
  }
  return false;
}

Drafter::Drafter(model::CausalLM& lm, ModelRunner& runner, kv::KvManager& kv, TpRanks* tp)
    : lm_(lm), runner_(runner), kv_(kv), tp_(tp) {
  DSA_CHECK(lm_.num_draft_layers() > 0, "speculative decoding: the model has no MTP layer");
  const int ranks = tp_ ? tp_->size() : 1;
  for (int r = 0; r < ranks; ++r) devices_.push_back(tp_ ? tp_->device(r) : lm_.device());
  bufs_.resize(static_cast<size_t>(ranks));
}

Tensor Drafter::buffer(int rank, int i, int64_t tokens) {
  Tensor& b = bufs_[static_cast<size_t>(rank)][static_cast<size_t>(i)];
  const int64_t W = lm_.hidden_width();
  if (!b.defined() || b.size(0) < tokens)
    b = Tensor::empty({std::max<int64_t>(tokens, b.defined() ? 2 * b.size(0) : 0), W}, DType::F32,
                      devices_[static_cast<size_t>(rank)]);
  return b.slice(0, 0, tokens);
}

std::vector<StepExtras> Drafter::target_extras(int64_t tokens) {
  std::vector<StepExtras> xs(devices_.size());
  for (size_t r = 0; r < xs.size(); ++r) xs[r].hidden_out = buffer(static_cast<int>(r), 0, tokens);
  return xs;
}

StepResult Drafter::step(const kv::Batch& b, const std::vector<RowRequest>& rows, int src, int out,
                         const Tensor& hidden_rows) {
  std::vector<StepExtras> xs(devices_.size());
  for (size_t r = 0; r < xs.size(); ++r) {
    xs[r].draft = true;
    xs[r].hidden_src = bufs_[r][static_cast<size_t>(src)];
    xs[r].hidden_out = buffer(static_cast<int>(r), out, b.num_tokens());
    xs[r].hidden_rows = hidden_rows;
  }
  return tp_ ? tp_->run(b, rows, &xs) : runner_.run(b, rows, &xs[0]);
}

int32_t Drafter::pick(Sequence& s, const StepResult& res, size_t row, int64_t pos) {
  const int32_t t = res.tokens[row];
  if (!s.rejection || t < 0) return t;
  const int64_t V = lm_.config().vocab_size;
  std::vector<float> q(static_cast<size_t>(V));
  const float* logits = res.logits.data<float>() + static_cast<int64_t>(res.logits_row[row]) * V;
  const auto counter = static_cast<uint64_t>(pos);
  if (!ops::sampling_probs(logits, V, sampling_row(s.params, s.seed, counter), q.data())) return -1;
  const int32_t d = draw_from(q, spec_uniform(s.seed, counter, SpecDraw::Draft));
  s.draft_q.push_back(std::move(q));
  return d;
}

void Drafter::run(std::vector<DraftJob>& jobs) {
  // 1. Catch the MTP cache up: one MTP step over every job's new committed positions.
  kv::Batch b;
  std::vector<int32_t> hidden_rows;
  std::vector<RowRequest> rows;
  std::vector<int> draft_row(jobs.size(), -1);  // the job's row in `rows`
  std::vector<int64_t> last_token(jobs.size(), -1);  // the job's last token in the batch
  for (size_t j = 0; j < jobs.size(); ++j) {
    DraftJob& job = jobs[j];
    Sequence& s = *job.seq;
    const int64_t start = std::max(s.mtp_done, job.step_start);
    const int64_t len = static_cast<int64_t>(s.tokens.size());
    if (job.valid_end <= start) {
      job.drafts = 0;
      continue;
    }
    std::vector<int32_t> next(s.tokens.begin() + start + 1, s.tokens.begin() + job.valid_end + 1);
    for (int64_t p = start; p < job.valid_end; ++p) hidden_rows.push_back(static_cast<int32_t>(job.first_row + p - job.step_start));
    b.add(s.id, start, next);
    s.mtp_done = job.valid_end;
    last_token[j] = b.num_tokens() - 1;
    // The last committed position predicts the token after the last one: the first draft.
    if (job.drafts > 0 && job.valid_end == len - 1) {
      draft_row[j] = static_cast<int>(rows.size());
      rows.push_back(RowRequest{b.num_tokens() - 1, {}, s.rejection});  // rejection: q comes to the host
    } else {
      job.drafts = 0;
    }
  }
  if (b.empty()) return;
  const bool any_draft = !rows.empty();
  if (rows.empty()) rows.push_back(RowRequest{0, {}, false});  // the runner samples at least one row
  Tensor rows_host = Tensor::empty({b.num_tokens()}, DType::I32);
  std::copy(hidden_rows.begin(), hidden_rows.end(), rows_host.data<int32_t>());
  int cur = 1;
  StepResult res = step(b, rows, 0, cur, rows_host);
  if (!any_draft) return;
  int max_drafts = 0;
  for (size_t j = 0; j < jobs.size(); ++j) {
    if (draft_row[j] < 0) continue;
    Sequence& s = *jobs[j].seq;
    s.drafts.clear();
    s.draft_q.clear();
    const int64_t len = static_cast<int64_t>(s.tokens.size());
    const int32_t t = pick(s, res, static_cast<size_t>(draft_row[j]), len);
    if (t < 0) {
      jobs[j].drafts = 0;
      continue;
    }
    s.drafts.push_back(t);
    // Draft k >= 2 writes the MTP cache at position len - 3 + k: pages ahead of the cache end.
    if (jobs[j].drafts > 1 && !kv_.reserve(s.id, len + jobs[j].drafts - 2)) jobs[j].drafts = 1;
    max_drafts = std::max(max_drafts, jobs[j].drafts);
  }

  // 2. Chain: draft k from draft k - 1 and the MTP layer's own hidden state.
  for (int k = 2; k <= max_drafts; ++k) {
    kv::Batch c;
    std::vector<int32_t> src_rows;
    std::vector<RowRequest> crow;
    std::vector<size_t> who;
    for (size_t j = 0; j < jobs.size(); ++j) {
      Sequence& s = *jobs[j].seq;
      if (jobs[j].drafts < k || static_cast<int>(s.drafts.size()) != k - 1) continue;
      const int64_t len = static_cast<int64_t>(s.tokens.size());
      const int32_t prev = s.drafts.back();
      c.add(s.id, len - 3 + k, std::span<const int32_t>(&prev, 1));
      src_rows.push_back(static_cast<int32_t>(last_token[j]));
      last_token[j] = c.num_tokens() - 1;
      crow.push_back(RowRequest{c.num_tokens() - 1, {}, s.rejection});
      who.push_back(j);
    }
    if (c.empty()) break;
    Tensor src_host = Tensor::empty({c.num_tokens()}, DType::I32);
    std::copy(src_rows.begin(), src_rows.end(), src_host.data<int32_t>());
    res = step(c, crow, cur, 3 - cur, src_host);
    cur = 3 - cur;
    for (size_t i = 0; i < who.size(); ++i) {
      Sequence& s = *jobs[who[i]].seq;
      const int32_t t = pick(s, res, i, static_cast<int64_t>(s.tokens.size()) + k - 1);  // draft k's position
      if (t < 0)
        jobs[who[i]].drafts = k - 1;
      else
        jobs[who[i]].seq->drafts.push_back(t);
    }
  }
}

}  // namespace dsa::engine
