#include "dsa/engine/engine.h"

#include <algorithm>
#include <random>

#include <fmt/format.h>

#include "dsa/core/error.h"
#include "dsa/core/log.h"
#include "dsa/engine/kv_manager.h"
#include "dsa/engine/sampler.h"

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
  DSA_CHECK(max_running >= 1, "engine: max_running must be >= 1, got {}", max_running);
  DSA_CHECK(max_step_tokens >= max_running, "engine: max_step_tokens ({}) must be >= max_running ({})",
            max_step_tokens, max_running);
  DSA_CHECK(max_prefill_chunk >= 0, "engine: max_prefill_chunk must be >= 0, got {}", max_prefill_chunk);
  DSA_CHECK(max_model_len >= 0, "engine: max_model_len must be >= 0, got {}", max_model_len);
}

Engine::Engine(model::CausalLM& lm, EngineOptions options) : lm_(lm), opt_(std::move(options)) {
  opt_.validate();
  const int64_t ctx = lm_.config().max_position_embeddings;
  max_model_len_ = opt_.max_model_len > 0 ? opt_.max_model_len : ctx;
  DSA_CHECK(max_model_len_ >= 1 && (ctx <= 0 || max_model_len_ <= ctx),
            "engine: max_model_len {} exceeds the model's max_position_embeddings {}", max_model_len_, ctx);
  for (int32_t t : opt_.eos_token_ids)
    DSA_CHECK(t >= 0 && t < lm_.config().vocab_size, "engine: eos id {} is outside the vocabulary [0, {})", t,
              lm_.config().vocab_size);
}

Engine::~Engine() {
  for (Sequence* s : running_) {
    try {
      lm_.free_request(s->model_id);
    } catch (const std::exception&) {
    }
  }
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
            "prompt ({} tokens) + max_tokens ({}) = {} exceeds the maximum context length {}", prompt.size(),
            params.max_tokens, need, max_model_len_);
}

uint64_t Engine::add_request(std::vector<int32_t> prompt, const SamplingParams& params) {
  check_request(prompt, params);
  auto s = std::make_unique<Sequence>();
  s->id = next_id_++;
  s->prompt_len = static_cast<int64_t>(prompt.size());
  s->tokens = std::move(prompt);
  s->params = params;
  s->rng.seed(params.seed ? *params.seed : std::random_device{}());
  waiting_.push_back(s.get());
  const uint64_t id = s->id;
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
  if (s.model_id >= 0) {
    lm_.free_request(s.model_id);
    running_.erase(std::find(running_.begin(), running_.end(), &s));
    admission_blocked_ = false;  // pages came free
  } else {
    waiting_.erase(std::find(waiting_.begin(), waiting_.end(), &s));
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

void Engine::abort(uint64_t id) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  finish(*it->second, FinishReason::Abort, pending_);
}

std::vector<Engine::Slot> Engine::schedule() {
  std::vector<Slot> plan;
  int64_t budget = opt_.max_step_tokens;
  const int64_t chunk_cap = opt_.max_prefill_chunk > 0 ? opt_.max_prefill_chunk : opt_.max_step_tokens;
  if (running_.empty()) admission_blocked_ = false;  // nothing left to wait for
  for (Sequence* s : running_)
    if (s->remaining() == 1 && budget > 0) {
      plan.push_back({s, 1});
      budget -= 1;
    }
  for (Sequence* s : running_)
    if (s->remaining() > 1 && budget > 0) {
      const int64_t c = std::min({s->remaining(), budget, chunk_cap});
      plan.push_back({s, c});
      budget -= c;
    }
  while (!waiting_.empty() && budget > 0 && static_cast<int>(running_.size()) < opt_.max_running &&
         !admission_blocked_) {
    Sequence* s = waiting_.front();
    try {
      s->model_id = lm_.add_request();
    } catch (const Error&) {
      // The model holds fewer requests than max_running (DeepSeek-V4's KV manager: its
      // max_requests): wait for one to finish. With none running, that is a real error.
      if (running_.empty()) throw;
      break;
    }
    waiting_.pop_front();
    running_.push_back(s);
    const int64_t c = std::min({s->remaining(), budget, chunk_cap});
    plan.push_back({s, c});
    budget -= c;
  }
  return plan;
}

void Engine::preempt_last() {
  Sequence* s = running_.back();
  running_.pop_back();
  lm_.free_request(s->model_id);
  s->model_id = -1;
  s->computed = 0;
  waiting_.push_front(s);
  admission_blocked_ = true;
  ++preemptions_;
  log_info("engine: KV cache full; request {} preempted ({} tokens will be recomputed)", s->id, s->tokens.size());
}

std::vector<StepOutput> Engine::step() {
  std::vector<StepOutput> out = std::move(pending_);
  pending_.clear();
  const int64_t V = lm_.config().vocab_size;
  for (;;) {
    const std::vector<Slot> plan = schedule();
    if (plan.empty()) return out;
    model::ForwardBatch b;
    for (const Slot& sl : plan)
      for (int64_t i = 0; i < sl.count; ++i) {
        const int64_t pos = sl.seq->computed + i;
        b.token_ids.push_back(sl.seq->tokens[static_cast<size_t>(pos)]);
        b.request.push_back(sl.seq->model_id);
        b.positions.push_back(pos);
      }
    Tensor logits;
    try {
      logits = lm_.forward(b);
    } catch (const KvOutOfMemory& e) {
      if (running_.size() > 1) {
        preempt_last();
        continue;
      }
      Sequence& s = *running_.front();
      finish(s, FinishReason::Error, out,
             fmt::format("the KV cache cannot hold this request even alone ({} tokens): {}", s.tokens.size(),
                         e.what()));
      continue;
    }
    DSA_CHECK(logits.dim() == 2 && logits.size(0) == static_cast<int64_t>(plan.size()) && logits.size(1) == V,
              "engine: the forward returned logits {} for {} requests of vocabulary {}", logits.str(), plan.size(), V);
    const float* rows = logits.data<float>();
    for (size_t r = 0; r < plan.size(); ++r) {
      Sequence& s = *plan[r].seq;
      s.computed += plan[r].count;
      if (s.remaining() > 0) continue;  // mid-prompt chunk: its logits are not used
      if (const int64_t bad = first_non_finite(rows + r * V, V); bad >= 0) {
        finish(s, FinishReason::Error, out,
               fmt::format("the model produced a non-finite logit ({} for token id {}) at position {}: broken weights "
                           "or arithmetic (`dsa check-model` scans the weights for NaN / Inf)",
                           rows[r * V + bad], bad, s.computed - 1));
        continue;
      }
      const int32_t tok = sample_token(rows + r * V, V, s.params, s.rng);
      s.tokens.push_back(tok);
      StepOutput o = report(s);
      o.new_tokens.push_back(tok);
      out.push_back(std::move(o));
      const bool eos = !s.params.ignore_eos &&
                       std::find(opt_.eos_token_ids.begin(), opt_.eos_token_ids.end(), tok) != opt_.eos_token_ids.end();
      const bool stop = std::find(s.params.stop_token_ids.begin(), s.params.stop_token_ids.end(), tok) !=
                        s.params.stop_token_ids.end();
      if (eos || stop)
        finish(s, FinishReason::Stop, out);
      else if (s.generated() >= s.params.max_tokens || static_cast<int64_t>(s.tokens.size()) >= max_model_len_)
        finish(s, FinishReason::Length, out);
    }
    return out;
  }
}

std::vector<Completion> Engine::generate(const std::vector<std::vector<int32_t>>& prompts,
                                         const std::vector<SamplingParams>& params) {
  DSA_CHECK(params.size() == prompts.size() || params.size() == 1,
            "engine generate: {} prompts but {} sampling params (give one or one each)", prompts.size(),
            params.size());
  std::map<uint64_t, size_t> index;
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
