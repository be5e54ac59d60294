#include "dsa/engine/engine.h"

#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "dsa/core/cuda_stream.h"
#include "dsa/core/error.h"
#include "dsa/core/log.h"
#include "dsa/engine/sampler.h"
#include "dsa/engine/tp_ranks.h"

namespace dsa::engine {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::None: return "";
    case FinishReason::Length: return "length";
    case FinishReason::Stop: return "stop";
    case FinishReason::Abort: return "abort";
    case FinishReason::Error: return "error";
  }
  return "";
}

void EngineOptions::validate() const {
  DSA_CHECK(max_running >= 1, "engine: max_running (--max-num-seqs) must be >= 1, got {}", max_running);
  DSA_CHECK(max_step_tokens >= max_running,
            "engine: max_step_tokens (--max-num-batched-tokens, {}) must be >= max_running (--max-num-seqs, {})",
            max_step_tokens, max_running);
  DSA_CHECK(max_prefill_chunk >= 0, "engine: max_prefill_chunk must be >= 0, got {}", max_prefill_chunk);
  DSA_CHECK(max_model_len >= 0, "engine: max_model_len must be >= 0, got {}", max_model_len);
  DSA_CHECK(kv_blocks >= 0, "engine: kv_blocks must be >= 0, got {}", kv_blocks);
  DSA_CHECK(graph_max_batch >= -1, "engine: graph_max_batch (--max-graph-batch) must be >= -1, got {}", graph_max_batch);
  DSA_CHECK(speculative_tokens >= 0 && speculative_tokens <= 64,
            "engine: --speculative-tokens must be in [0, 64], got {}", speculative_tokens);
  memory.validate();
}

Engine::Engine(model::CausalLM& lm, EngineOptions options) : Engine(lm, nullptr, std::move(options)) {}
Engine::Engine(TensorParallelModels& tp, EngineOptions options) : Engine(tp.model(0), &tp, std::move(options)) {}

Engine::Engine(model::CausalLM& lm, TensorParallelModels* tp, EngineOptions options) : lm_(lm), opt_(std::move(options)) {
  opt_.validate();
  if (tp) check_tensor_parallel_options(tp->size(), opt_.speculative_tokens, tp->distributed());
  const model::ModelConfig& cfg = lm_.config();
  const int64_t ctx = cfg.max_position_embeddings;
  max_model_len_ = opt_.max_model_len > 0 ? opt_.max_model_len : ctx;
  DSA_CHECK(max_model_len_ >= 1 && (ctx <= 0 || max_model_len_ <= ctx),
            "engine: max_model_len {} exceeds the model's max_position_embeddings {}", max_model_len_, ctx);
  DSA_CHECK(opt_.speculative_tokens == 0 || cfg.num_mtp_layers > 0,
            "engine: --speculative-tokens {} needs an MTP layer, but {} has none (num_nextn_predict_layers = {}; "
            "conversions without the MTP weights cannot speculate): use --speculative-tokens 0",
            opt_.speculative_tokens, cfg.name, cfg.num_mtp_layers);
  DSA_CHECK(opt_.speculative_tokens == 0 || lm_.num_draft_layers() > 0,
            "engine: --speculative-tokens {}: the model was loaded without its MTP layer (model::LoadModelOptions::mtp)",
            opt_.speculative_tokens);
  for (int32_t t : opt_.eos_token_ids)
    DSA_CHECK(t >= 0 && t < cfg.vocab_size, "engine: eos id {} is outside the vocabulary [0, {})", t, cfg.vocab_size);

  kv::KvManagerOptions ko;
  ko.device = lm_.device();
  ko.max_requests = opt_.max_running;
  ko.max_step_tokens = opt_.max_step_tokens;
  ko.max_position = max_model_len_;
  ko.state_backups = opt_.speculative_tokens > 0;  // a rollback may restore the compressor state
  std::string how;
  if (opt_.kv_blocks > 0) {
    ko.num_blocks = opt_.kv_blocks;
    how = fmt::format("{} pages per cache group", opt_.kv_blocks);
  } else {
    const KvBudget b = tp ? tp_kv_budget(*tp, opt_.memory, opt_.max_step_tokens, cfg.hidden_size, cfg.vocab_size)
                          : kv_budget(lm_.device(), opt_.memory, opt_.max_step_tokens, cfg.hidden_size, cfg.vocab_size);
    ko.budget_bytes = b.bytes;
    how = b.how;
  }
  kv_ = std::make_unique<kv::KvManager>(lm_.kv_requirements(), ko);
  DSA_CHECK(kv_->fits_alone(max_model_len_),
            "engine: the KV cache ({}: {} tokens of context) cannot hold one request of max_model_len {} tokens: give "
            "more memory (--gpu-memory-utilization, --kv-cache-memory) or a smaller --max-model-len",
            how, kv_->capacity_tokens(), max_model_len_);
  lm_.reserve(opt_.max_step_tokens, opt_.max_running);
  runner_ = std::make_unique<ModelRunner>(lm_, *kv_);
  if (!opt_.cuda_graphs) runner_->set_graphs(false);
  else if (runner_->graphs()) runner_->set_graphs(true, opt_.graph_max_tokens);
  // Padding serves steps without the MTP hand-over (ModelRunner::run): not with speculation.
  if (opt_.graph_max_batch >= 0 && opt_.speculative_tokens == 0 && (opt_.decode_padding == EngineOptions::DecodePadding::Always ||
                                    (opt_.decode_padding == EngineOptions::DecodePadding::WithGraphs && runner_->graphs())))
    runner_->set_decode_padding(std::min<int64_t>({opt_.graph_max_batch > 0 ? opt_.graph_max_batch : opt_.max_running,
                                                   opt_.max_running, std::max<int64_t>(opt_.graph_max_tokens, 1)}));
  if (tp && tp->size() > 1) {  // after set_graphs: tensor-parallel steps run eagerly (tp_ranks.h)
    tp_ = std::make_unique<TpRanks>(*tp, *kv_, *runner_, ko, opt_.max_step_tokens, opt_.max_running);
    log_info("tensor parallel: {} ranks (rank 0 on {}); collectives through host memory, CUDA graphs off", tp->size(),
             tp->device(0).str());
  }
  if (opt_.speculative_tokens > 0) drafter_ = std::make_unique<Drafter>(lm_, *runner_, *kv_, tp_.get());
  if (opt_.log_capacity)
    log_info("KV cache: {:.2f} GiB ({}) holds {} tokens of context = {} concurrent requests of {} tokens (max_running "
             "{}, max_step_tokens {})",
             static_cast<double>(kv_->total_bytes()) / (1 << 30), how, kv_->capacity_tokens(), capacity_requests(),
             max_model_len_, opt_.max_running, opt_.max_step_tokens);
}

Engine::~Engine() = default;

int Engine::tensor_parallel_size() const { return tp_ ? tp_->size() : 1; }

int64_t Engine::capacity_requests() const {
  int64_t n = opt_.max_running;
  for (int g = 0; g < static_cast<int>(kv_->groups().size()); ++g) {
    const int64_t per = std::max<int64_t>(kv_->pages_for(g, max_model_len_), 1);
    n = std::min(n, kv_->num_pages(g) / per);
  }
  return n;
}

void Engine::check_request(const std::vector<int32_t>& prompt, const SamplingParams& params) const {
  const int64_t V = lm_.config().vocab_size;
  DSA_CHECK(!prompt.empty(), "the prompt is empty");
  for (size_t i = 0; i < prompt.size(); ++i)
    DSA_CHECK(prompt[i] >= 0 && prompt[i] < V, "prompt token {} is {}, outside the vocabulary [0, {})", i,
              prompt[i], V);
  params.validate(V);
  const int64_t need = static_cast<int64_t>(prompt.size()) + params.max_tokens;
  DSA_CHECK(need <= max_model_len_,
            "prompt ({} tokens) + max_tokens ({}) = {} exceeds the maximum context length {} (--max-model-len "
            "sets it)", prompt.size(), params.max_tokens, need, max_model_len_);
  DSA_CHECK(kv_->fits_alone(need),
            "prompt ({} tokens) + max_tokens ({}) = {} tokens exceed what the whole KV cache can hold ({} tokens; "
            "--kv-cache-memory or --gpu-memory-utilization size it)",
            prompt.size(), params.max_tokens, need, kv_->capacity_tokens());
}

kv::RequestId Engine::add_request(std::vector<int32_t> prompt, const SamplingParams& params) {
  check_request(prompt, params);
  auto s = std::make_unique<Sequence>();
  s->id = next_id_++;
  s->prompt_len = static_cast<int64_t>(prompt.size());
  s->tokens = std::move(prompt);
  s->params = params;
  s->seed = params.seed ? *params.seed : std::random_device{}() * 0x100000000ull + std::random_device{}();
  // Speculation for requests the device sampler serves whole (docs/speculative-decoding.md).
  const bool host_rows = params.processes_logits() || params.logprobs >= 0 || params.prompt_logprobs >= 0;
  s->speculative_tokens = host_rows ? 0
                          : params.speculative_tokens < 0
                              ? opt_.speculative_tokens
                              : std::min(params.speculative_tokens, opt_.speculative_tokens);
  s->rejection = s->speculative_tokens > 0 && params.temperature > 0 &&
                 opt_.speculative_acceptance == SpecAcceptance::Rejection;
  waiting_.push_back(s.get());
  const kv::RequestId id = s->id;
  seqs_[id] = std::move(s);
  return id;
}

StepOutput Engine::report(const Sequence& s) const {
  StepOutput o;
  o.id = s.id;
  o.prompt_tokens = s.prompt_len;
  o.completion_tokens = s.generated();
  return o;
}

void Engine::finish(Sequence& s, FinishReason r, std::vector<StepOutput>& out, std::string error) {
  if (s.running) {
    kv_->release(s.id);
    running_.erase(std::find(running_.begin(), running_.end(), &s));
    admission_blocked_ = false;  // pages came free
  } else {
    auto it = std::find(waiting_.begin(), waiting_.end(), &s);
    if (it != waiting_.end()) waiting_.erase(it);
  }
  // The caller may already hold this step's output for s (its last token): merge into it.
  auto it = std::find_if(out.begin(), out.end(), [&](const StepOutput& o) { return o.id == s.id; });
  if (it == out.end()) {
    out.push_back(report(s));
    it = out.end() - 1;
  }
  it->finish = r;
  it->error = std::move(error);
  it->completion_tokens = s.generated();
  seqs_.erase(s.id);  // s is gone after this
}

void Engine::abort(kv::RequestId id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  finish(*it->second, FinishReason::Abort, pending_);
}

void Engine::preempt(Sequence* s) {
  running_.erase(std::find(running_.begin(), running_.end(), s));
  kv_->release(s->id);
  s->running = false;
  s->computed = 0;
  s->drafts.clear();
  s->draft_q.clear();
  s->mtp_done = 0;
  waiting_.push_front(s);
  admission_blocked_ = true;  // until a request finishes: no thrashing between preempted requests
  ++preemptions_;
  log_info("engine: KV cache full; request {} preempted ({} tokens will be recomputed)", s->id, s->tokens.size());
}

std::vector<Engine::Slot> Engine::schedule() {
  std::vector<Slot> plan;
  kv::Batch b;
  auto add = [&](Sequence* s, int64_t count) {
    b.add_positions(s->id, s->computed, count);
    plan.push_back({s, count});
  };
  auto drop_last = [&] {
    const int64_t n = plan.back().count;
    b.request.resize(b.request.size() - static_cast<size_t>(n));
    b.position.resize(b.position.size() - static_cast<size_t>(n));
    plan.pop_back();
  };
  auto fits = [&] { return kv_->demand(b).fits(); };
  int64_t budget = opt_.max_step_tokens;
  const int64_t chunk_cap = opt_.max_prefill_chunk > 0 ? opt_.max_prefill_chunk : opt_.max_step_tokens;

  // 1. decodes; when their pages do not fit, preempt the newest running requests
  for (size_t i = 0; i < running_.size(); ++i) {
    Sequence* s = running_[i];
    if (s->remaining() != 1 || budget == 0) continue;
    // With drafts: the last token and the drafts, verified together; the drafts are dropped
    // first when the step has no room or no pages for them.
    if (static_cast<int64_t>(s->drafts.size()) > budget - 1) s->drafts.resize(static_cast<size_t>(budget - 1));
    add(s, 1 + static_cast<int64_t>(s->drafts.size()));
    if (!s->drafts.empty() && !fits()) {
      drop_last();
      s->drafts.clear();
      add(s, 1);
    }
    while (!fits()) {
      Sequence* victim = running_.back();
      if (plan.back().seq == victim) drop_last();
      else
        for (size_t j = 0; j < plan.size(); ++j)
          if (plan[j].seq == victim) {  // not the last: rebuild the batch without it
            plan.erase(plan.begin() + static_cast<int64_t>(j));
            b = kv::Batch{};
            for (const Slot& sl : plan) b.add_positions(sl.seq->id, sl.seq->computed, sl.count);
            break;
          }
      preempt(victim);
      if (victim == s) break;
    }
    if (std::find(running_.begin(), running_.end(), s) == running_.end()) break;  // s itself was preempted
    budget -= plan.back().count;
  }
  budget = opt_.max_step_tokens - b.num_tokens();
  // 2. prefill chunks of running requests: the largest chunk (halving) whose pages fit
  for (Sequence* s : running_) {
    if (s->remaining() <= 1 || budget == 0) continue;
    for (int64_t c = std::min({s->remaining(), budget, chunk_cap}); c > 0; c /= 2) {
      add(s, c);
      if (fits()) break;
      drop_last();
    }
    if (!plan.empty() && plan.back().seq == s) budget -= plan.back().count;
  }
  // 3. admissions, in arrival order, while a first chunk fits
  if (running_.empty()) admission_blocked_ = false;  // nothing left to wait for
  while (!admission_blocked_ && !waiting_.empty() && budget > 0 && static_cast<int>(running_.size()) < opt_.max_running) {
    Sequence* s = waiting_.front();
    const auto id = s->id;
    if (!kv_->can_admit(std::min({s->remaining(), budget, chunk_cap}))) break;
    kv_->add_request(id);
    add(s, std::min({s->remaining(), budget, chunk_cap}));
    if (!fits()) {
      drop_last();
      kv_->release(id);
      break;
    }
    waiting_.pop_front();
    s->running = true;
    running_.push_back(s);
    budget -= plan.back().count;
  }
  return plan;
}

std::vector<StepOutput> Engine::step() {
  std::vector<StepOutput> out = std::move(pending_);
  pending_.clear();
  std::vector<Slot> plan = schedule();
  // Nothing fits (prefilling requests holding the pages each other needs): make room by
  // preempting the newest until something runs.
  while (plan.empty() && running_.size() > 1) {
    preempt(running_.back());
    plan = schedule();
  }
  if (plan.empty()) {
    // A request that cannot get its pages even alone (cannot happen for requests that passed
    // check_request, but never spin on it).
    if (!running_.empty()) {
      Sequence& s = *running_.front();
      finish(s, FinishReason::Error, out,
             fmt::format("the KV cache cannot hold this request ({} tokens) even alone", s.tokens.size()));
    } else if (!waiting_.empty()) {
      Sequence& s = *waiting_.front();
      finish(s, FinishReason::Error, out,
             fmt::format("the KV cache cannot admit this request ({} tokens) even with nothing else running",
                         s.tokens.size()));
    }
    return out;
  }
  kv::Batch b;
  std::vector<RowRequest> rows;
  std::vector<int> row_of(plan.size(), -1);        // the row a request samples its next token from
  std::vector<int> prompt_rows(plan.size(), -1);   // first of the rows of a prompt-logprobs chunk
  std::vector<int64_t> first_row(plan.size(), 0);  // the batch row of the request's first token
  std::vector<int> drafted(plan.size(), 0);        // drafts verified in this step (rows row_of .. + drafted)
  for (size_t i = 0; i < plan.size(); ++i) {
    Sequence& s = *plan[i].seq;
    const int64_t count = plan[i].count;
    const int64_t real = std::min(count, s.remaining());  // the rest are drafts
    drafted[i] = static_cast<int>(count - real);
    std::vector<int32_t> toks(s.tokens.begin() + s.computed, s.tokens.begin() + s.computed + real);
    toks.insert(toks.end(), s.drafts.begin(), s.drafts.begin() + drafted[i]);
    first_row[i] = b.num_tokens();
    b.add(s.id, s.computed, toks);
    if (s.wants_prompt_logprobs() && s.computed < s.prompt_len) {  // every token's row of the chunk
      prompt_rows[i] = static_cast<int>(rows.size());
      for (int64_t t = 0; t < count; ++t) rows.push_back(RowRequest{b.num_tokens() - count + t, {}, true});
    }
    if (s.computed + real < static_cast<int64_t>(s.tokens.size())) continue;  // mid-prompt chunk
    row_of[i] = static_cast<int>(rows.size());
    // One row per token of the step from the last committed one on: row j picks the token at
    // index tokens.size() + j with the counter decoding without drafts would use.
    for (int j = 0; j <= drafted[i]; ++j) {
      RowRequest r;
      r.token = b.num_tokens() - 1 - drafted[i] + j;
      r.sampling = sampling_row(s.params, s.seed, static_cast<uint64_t>(s.tokens.size()) + static_cast<uint64_t>(j));
      // The rejection rule reads the target's rows of the drafts on the host (rejection_accept).
      r.want_logits = s.params.logprobs >= 0 || s.params.processes_logits() || (s.rejection && j < drafted[i]);
      rows.push_back(r);
    }
  }
  if (rows.empty()) rows.push_back(RowRequest{b.num_tokens() - 1, {}, false});  // prefill only: one unused row
  std::vector<StepExtras> extras;  // per rank
  if (drafter_) {
    extras = drafter_->target_extras(b.num_tokens());
    // A rejected draft may have to undo the compressor state (rollback_needs_state): snapshot it
    // (on every tensor-parallel rank: each holds the state in its own pools).
    if (!kv_->requirements().states.empty()) {
      cuda_stream::StreamScope on_stream(runner_->stream());
      for (size_t i = 0; i < plan.size(); ++i)
        if (drafted[i] > 0 && rollback_needs_state(kv_->groups(), plan[i].seq->computed + 1,
                                                   plan[i].seq->computed + 1 + drafted[i])) {
          kv_->save_state(plan[i].seq->id);
          if (tp_) tp_->save_state_slot(kv_->state_slot(plan[i].seq->id));
        }
    }
  }
  const StepResult res = tp_ ? tp_->run(b, rows, drafter_ ? &extras : nullptr)
                             : runner_->run(b, rows, drafter_ ? &extras[0] : nullptr);
  const int64_t V = lm_.config().vocab_size;
  auto logits_of = [&](int row) { return res.logits.data<float>() + res.logits_row[static_cast<size_t>(row)] * V; };

  std::vector<DraftJob> jobs;
  for (size_t i = 0; i < plan.size(); ++i) {
    Sequence& s = *plan[i].seq;
    const kv::RequestId id = s.id;
    const int64_t step_start = s.computed;
    if (prompt_rows[i] >= 0)
      for (int64_t t = 0; t < plan[i].count; ++t) {
        const int64_t pos = s.computed + t;  // this row predicts the prompt token at pos + 1
        if (pos + 1 < s.prompt_len && pos == static_cast<int64_t>(s.prompt_logprobs.size()))
          s.prompt_logprobs.push_back(token_logprob(logits_of(prompt_rows[i] + static_cast<int>(t)), V,
                                                    s.tokens[static_cast<size_t>(pos + 1)], s.params.prompt_logprobs));
      }
    s.computed += plan[i].count;
    if (row_of[i] < 0) {  // a mid-prompt chunk: the MTP cache follows it
      if (s.speculative_tokens > 0) jobs.push_back({&s, first_row[i], step_start, s.computed, 0});
      continue;
    }
    // The tokens this step emits: one, or with drafts the accepted ones and the correction or
    // bonus token (exact match: accepted_prefix; sampled under the rejection rule:
    // rejection_accept); stops / eos / max_tokens inside the span end it there.
    std::vector<int32_t> picks;
    int accepted = 0;
    if (drafted[i] > 0) {
      const auto first = res.tokens.begin() + row_of[i];
      const std::vector<int32_t> target(first, first + drafted[i] + 1);
      const std::span<const int32_t> drafts(s.drafts.data(), static_cast<size_t>(drafted[i]));
      if (opt_.benchmark_accept_all_drafts) {  // benchmark only (engine.h): the drafts + the bonus token
        accepted = drafted[i];
        picks.assign(drafts.begin(), drafts.end());
        picks.push_back(target.back());
      } else if (s.rejection) {
        accepted = rejection_accept(s, drafts, target, [&](int j) { return logits_of(row_of[i] + j); }, V, picks);
      } else {
        accepted = accepted_prefix(drafts, target);
        picks.assign(target.begin(), target.begin() + accepted + 1);
      }
      ++spec_.verify_steps;
      spec_.drafted += drafted[i];
      spec_.accepted += accepted;
    } else {
      int32_t tok = res.tokens[static_cast<size_t>(row_of[i])];
      if (tok >= 0 && s.params.processes_logits()) {  // penalties, bias, min_tokens: sampled on the host
        std::vector<int32_t> stop_ids = s.params.stop_token_ids;
        if (!s.params.ignore_eos) stop_ids.insert(stop_ids.end(), opt_.eos_token_ids.begin(), opt_.eos_token_ids.end());
        const float* raw = logits_of(row_of[i]);
        std::vector<float> processed(raw, raw + V);
        const std::span<const int32_t> all(s.tokens);
        process_logits(processed.data(), V, s.params, all.first(static_cast<size_t>(s.prompt_len)),
                       all.subspan(static_cast<size_t>(s.prompt_len)), stop_ids);
        tok = sample_token(processed.data(), V, s.params, s.seed, static_cast<uint64_t>(s.tokens.size()));
      }
      picks.push_back(tok);
    }
    const int64_t len_before = static_cast<int64_t>(s.tokens.size());
    bool finished = false;
    StepOutput o = report(s);
    for (size_t k = 0; k < picks.size() && !finished; ++k) {
      const int32_t tok = picks[k];
      if (tok < 0) {
        if (!o.new_tokens.empty()) out.push_back(o);
        finish(s, FinishReason::Error, out,
               "the model produced a non-finite logit (NaN or infinity) for this request: broken weights or "
               "arithmetic (`dsa check-model` scans the weights for NaN / Inf)");
        finished = true;
        break;
      }
      s.tokens.push_back(tok);
      o.new_tokens.push_back(tok);
      o.completion_tokens = s.generated();
      if (s.params.logprobs >= 0) o.logprobs.push_back(token_logprob(logits_of(row_of[i]), V, tok, s.params.logprobs));
      if (s.params.prompt_logprobs >= 0 && !s.prompt_logprobs_reported) {
        o.prompt_logprobs = s.prompt_logprobs;
        s.prompt_logprobs_reported = true;
      }
      const bool eos = !s.params.ignore_eos &&
                       std::find(opt_.eos_token_ids.begin(), opt_.eos_token_ids.end(), tok) != opt_.eos_token_ids.end();
      const bool stop = std::find(s.params.stop_token_ids.begin(), s.params.stop_token_ids.end(), tok) !=
                        s.params.stop_token_ids.end();
      if (eos || stop || s.generated() >= s.params.max_tokens ||
          static_cast<int64_t>(s.tokens.size()) >= max_model_len_) {
        out.push_back(std::move(o));
        finish(s, eos || stop ? FinishReason::Stop : FinishReason::Length, out);
        finished = true;
      }
    }
    if (finished) continue;  // s is gone
    if (drafted[i] > 0) spec_.emitted += static_cast<int64_t>(picks.size());
    out.push_back(std::move(o));
    if (drafted[i] > 0) {
      // Forget what the rejected drafts wrote (docs/speculative-decoding.md): the cache keeps the
      // committed tokens [step_start, keep); when a compressor window closed inside the rejected
      // span the state slots go back to the step's start and the accepted tokens are computed
      // again in the next step (a chunk, as after a preemption).
      const int64_t keep = step_start + 1 + accepted;
      if (accepted < drafted[i]) {
        if (rollback_needs_state(kv_->groups(), keep, s.computed) && !kv_->requirements().states.empty()) {
          cuda_stream::StreamScope on_stream(runner_->stream());
          kv_->restore_state(id);
          if (tp_) tp_->restore_state_slot(kv_->state_slot(id));
          kv_->truncate(id, step_start);
          s.computed = step_start;
          ++spec_.rollbacks;
        } else {
          kv_->truncate(id, keep);
          s.computed = keep;
        }
      }
      s.drafts.clear();
      s.draft_q.clear();
      if (s.speculative_tokens > 0) jobs.push_back({&s, first_row[i], step_start, keep, 0});
    } else if (s.speculative_tokens > 0) {
      jobs.push_back({&s, first_row[i], step_start, std::min(s.computed, len_before), 0});
    }
    // Drafts for the next step: not past max_tokens (every emitted token counts) or the context.
    if (s.speculative_tokens > 0 && s.remaining() == 1) {
      const int64_t len = static_cast<int64_t>(s.tokens.size());
      jobs.back().drafts = static_cast<int>(std::max<int64_t>(
          0, std::min<int64_t>({s.speculative_tokens, s.params.max_tokens - s.generated() - 1, max_model_len_ - len})));
    }
  }
  if (drafter_ && !jobs.empty()) drafter_->run(jobs);
  if (opt_.draft_hook)
    for (const DraftJob& j : jobs)
      if (!j.seq->drafts.empty()) {
        const size_t n = j.seq->drafts.size();
        opt_.draft_hook(*j.seq, j.seq->drafts);
        DSA_CHECK(j.seq->drafts.size() <= n, "engine: draft_hook lengthened the drafts ({} -> {})", n,
                  j.seq->drafts.size());
      }
  return out;
}

std::vector<Completion> Engine::generate(const std::vector<std::vector<int32_t>>& prompts,
                                         const std::vector<SamplingParams>& params) {
  DSA_CHECK(params.size() == prompts.size() || params.size() == 1,
            "engine generate: {} prompts but {} sampling params (give one or one each)", prompts.size(),
            params.size());
  std::map<kv::RequestId, size_t> index;
  for (size_t i = 0; i < prompts.size(); ++i)
    index[add_request(prompts[i], params[params.size() == 1 ? 0 : i])] = i;
  std::vector<Completion> done(prompts.size());
  size_t left = prompts.size();
  while (left > 0) {
    DSA_CHECK(has_unfinished(), "engine generate: {} requests unfinished but nothing to run", left);
    for (const StepOutput& o : step()) {
      auto it = index.find(o.id);
      if (it == index.end()) continue;  // a request queued outside generate()
      Completion& c = done[it->second];
      c.tokens.insert(c.tokens.end(), o.new_tokens.begin(), o.new_tokens.end());
      if (o.finished()) {
        c.finish = o.finish;
        c.error = o.error;
        --left;
      }
    }
  }
  return done;
}

}  // namespace dsa::engine
