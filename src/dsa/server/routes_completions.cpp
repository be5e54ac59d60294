// POST /v1/completions (fields: openai_protocol.h). Each prompt gives best_of engine sequences
// (seed + j for candidate j when a seed is given); the response has n choices per prompt,
// index = prompt * n + choice (with best_of > n: the n candidates of highest summed logprob).
// Checked before anything is queued, each a 400 naming the field: the fields, the vocabulary,
// the context length, and whether the KV cache can ever hold prompt + max_tokens (max_tokens
// absent: as many as the context and the KV cache allow). A full queue is a 503 with
// Retry-After. Streamed or not, a client that goes away aborts its sequences.
#include <algorithm>
#include <atomic>
#include <numeric>

#include "dsa/core/error.h"
#include "dsa/server/generation.h"
#include "dsa/server/request_checks.h"
#include "dsa/server/routes.h"

namespace dsa::server {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string next_id() {
  static std::atomic<uint64_t> n{0};
  return "cmpl-" + std::to_string(unix_time()) + "-" + std::to_string(n++);
}

// A completion request ready to run.
struct Prepared {
  CompletionRequest cr;
  std::vector<SequenceRequest> seqs;  // prompt-major: prompt i, candidate j at i * best_of + j
  std::vector<std::string> echo_text;  // per prompt, when echo
  bool discard_output = false;         // max_tokens 0: the prompt is scored, nothing is generated
  int64_t prompt_tokens = 0;
};

Prepared prepare(const ServerContext& ctx, const std::string& body) {
  Prepared p;
  try {
    p.cr = parse_completion_request(body, ctx.opt.encode);
  } catch (const BadRequest&) {
    throw;
  } catch (const std::exception& e) {  // the tokenizer refused a prompt
    throw BadRequest(std::string("prompt: cannot tokenize: ") + e.what(), "prompt");
  }
  CompletionRequest& cr = p.cr;
  const engine::Engine& eng = ctx.engine;
  const int64_t request_max = max_request_tokens(eng);
  p.discard_output = cr.max_tokens && *cr.max_tokens == 0;
  for (size_t i = 0; i < cr.prompts.size(); ++i) {
    const std::vector<int32_t>& prompt = cr.prompts[i];
    p.prompt_tokens += static_cast<int64_t>(prompt.size());
    engine::SamplingParams sp = cr.params;
    sp.logprobs = cr.logprobs >= 0 ? cr.logprobs : (cr.best_of > cr.n ? 0 : -1);
    settle_and_check(eng, request_max, prompt, cr.max_tokens, sp, "prompt");
    for (int j = 0; j < cr.best_of; ++j) {
      engine::SamplingParams q = sp;
      if (sp.seed) q.seed = *sp.seed + static_cast<uint64_t>(j);
      // The prompt's logprobs are the same for every candidate: computed once.
      q.prompt_logprobs = (cr.echo && cr.logprobs >= 0 && j == 0) ? cr.logprobs : -1;
      p.seqs.push_back({prompt, q});
    }
    if (cr.echo) {
      std::string t;
      if (i < cr.prompt_texts.size()) {
        t = cr.prompt_texts[i];
      } else if (ctx.opt.decode) {
        try {
          t = ctx.opt.decode(prompt, cr.skip_special_tokens);
        } catch (const std::exception& e) {
          throw BadRequest(std::string("prompt: cannot decode for echo: ") + e.what(), "prompt");
        }
      }
      p.echo_text.push_back(std::move(t));
    }
  }
  const int64_t k = static_cast<int64_t>(p.seqs.size());
  if (ctx.opt.max_queue > 0 && k > ctx.opt.max_queue)
    throw BadRequest("the request asks for " + std::to_string(k) + " sequences (prompts x best_of); this server queues at most " +
                         std::to_string(ctx.opt.max_queue),
                     cr.prompts.size() > 1 ? "prompt" : "best_of");
  return p;
}

// The text of one token in logprobs: its decoding (special tokens kept), or "token_id:N".
std::string token_text(const ServerContext& ctx, const CompletionRequest& cr, int32_t id) {
  if (!cr.return_tokens_as_token_ids && ctx.opt.decode) {
    try {
      return ctx.opt.decode({id}, false);
    } catch (const std::exception&) {
    }
  }
  return "token_id:" + std::to_string(id);
}

void add_token(const ServerContext& ctx, const CompletionRequest& cr, LogprobsJson& lj, const engine::TokenLogprob& t) {
  std::vector<std::pair<std::string, float>> top;
  for (const auto& [id, lp] : t.top) top.emplace_back(token_text(ctx, cr, id), lp);
  top.emplace_back(token_text(ctx, cr, t.token), t.logprob);  // the chosen token is always listed (as vLLM)
  lj.add(token_text(ctx, cr, t.token), t.logprob, top);
}

// The echoed prompt's logprob entries: the first token has none.
void add_prompt_tokens(const ServerContext& ctx, const CompletionRequest& cr, LogprobsJson& lj,
                       const std::vector<int32_t>& prompt, const std::vector<engine::TokenLogprob>& plp) {
  for (size_t t = 0; t < prompt.size(); ++t) {
    if (t == 0 || t - 1 >= plp.size())
      lj.add(token_text(ctx, cr, prompt[t]), std::nullopt, {});
    else
      add_token(ctx, cr, lj, plp[t - 1]);
  }
}

// What a sequence produced, whole.
struct Result {
  std::string text;
  std::vector<int32_t> tokens;
  std::vector<engine::TokenLogprob> logprobs, prompt_logprobs;
  std::string finish, error;
  int64_t completion_tokens = 0;
  double score = 0;  // summed logprob (best_of)
};

void respond_whole(const ServerContext& ctx, const Prepared& p, Generation& gen, const std::string& id,
                   httplib::Response& res, RequestRecord& rec) {
  const CompletionRequest& cr = p.cr;
  std::vector<Result> r(p.seqs.size());
  while (!gen.finished()) {
    for (SequenceDelta& d : gen.poll(std::chrono::milliseconds(100))) {
      Result& x = r[d.index];
      if (!d.tokens.empty()) rec.first_token();
      x.text += d.text;
      x.tokens.insert(x.tokens.end(), d.tokens.begin(), d.tokens.end());
      x.logprobs.insert(x.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
      if (!d.prompt_logprobs.empty()) x.prompt_logprobs = std::move(d.prompt_logprobs);
      x.completion_tokens = d.completion_tokens;
      if (!d.finish_reason.empty()) {
        x.finish = d.finish_reason;
        x.error = d.error;
      }
    }
    if (!gen.finished() && !client_connected()) {  // nobody will read the answer
      gen.abort();
      close_after_response();
      res.status = 499;  // nginx's "client closed request", for the log line
      return;
    }
  }
  for (const Result& x : r) {
    if (x.finish == "error") return send_error(res, 500, "generation failed: " + x.error);
    if (x.finish == "abort") return send_error(res, 503, "the request was aborted: " + x.error);
  }
  json choices = json::array();
  int64_t completion_tokens = 0;
  for (size_t i = 0; i < cr.prompts.size(); ++i) {
    std::vector<size_t> cand(static_cast<size_t>(cr.best_of));
    std::iota(cand.begin(), cand.end(), i * static_cast<size_t>(cr.best_of));
    if (cr.best_of > cr.n) {
      for (size_t c : cand)
        for (size_t t = 0; t < r[c].tokens.size() && t < r[c].logprobs.size(); ++t) r[c].score += r[c].logprobs[t].logprob;
      std::stable_sort(cand.begin(), cand.end(), [&](size_t a, size_t b) { return r[a].score > r[b].score; });
    }
    const auto& plp = r[i * static_cast<size_t>(cr.best_of)].prompt_logprobs;
    for (int c = 0; c < cr.n; ++c) {
      const Result& x = r[cand[static_cast<size_t>(c)]];
      std::string text = cr.echo ? p.echo_text[i] : std::string();
      json lp = nullptr;
      if (cr.logprobs >= 0) {
        LogprobsJson lj;
        if (cr.echo) add_prompt_tokens(ctx, cr, lj, cr.prompts[i], plp);
        if (!p.discard_output)
          for (size_t t = 0; t < x.tokens.size() && t < x.logprobs.size(); ++t) add_token(ctx, cr, lj, x.logprobs[t]);
        lp = lj.json();
      }
      if (!p.discard_output) {
        text += x.text;
        completion_tokens += x.completion_tokens;
      }
      choices.push_back(choice_json(i * static_cast<size_t>(cr.n) + static_cast<size_t>(c), text,
                                    p.discard_output ? std::vector<int32_t>{} : x.tokens, lp,
                                    p.discard_output ? "length" : x.finish));
    }
  }
  rec.output_tokens = completion_tokens;
  send_json(res, 200,
            completion_json(id, unix_time(), ctx.opt.model_name, std::move(choices),
                            Usage{p.prompt_tokens, completion_tokens}));
}

// SSE: a chunk per sequence event (one choice each; with echo the choice's first chunk starts
// with the prompt), a final chunk with finish_reason per choice, the usage chunk (choices [])
// when asked, then [DONE]. An engine failure is an error event, then [DONE].
struct StreamState {
  const ServerContext* ctx = nullptr;
  Prepared p;
  std::unique_ptr<Generation> gen;
  std::string id;
  int64_t created = 0;
  std::shared_ptr<RequestRecord> rec;
  std::vector<size_t> offset;   // per choice: logprobs text_offset of its next token
  std::vector<bool> started;    // per choice: its first chunk went out
  std::vector<int64_t> completion_tokens;

  bool run(httplib::DataSink& sink);
};

bool StreamState::run(httplib::DataSink& sink) {
  const CompletionRequest& cr = p.cr;
  auto write = [&](const std::string& data) { return sse_event(sink, data); };
  auto finish_stream = [&](bool ok) {
    if (ok && cr.include_usage) {
      int64_t total = 0;
      for (int64_t c : completion_tokens) total += c;
      json u = completion_json(id, created, ctx->opt.model_name, json::array(), Usage{p.prompt_tokens, total});
      write(dump_json(u));
    }
    write("[DONE]");
    sink.done();
    return true;
  };
  for (;;) {
    if (!sink.is_writable()) {
      gen->abort();
      return false;
    }
    for (SequenceDelta& d : gen->poll(std::chrono::milliseconds(100))) {
      if (d.finish_reason == "error") {
        write(dump_json(error_json("generation failed: " + d.error, "internal_server_error", "", 500)));
        gen->abort();
        return finish_stream(false);
      }
      const size_t c = d.index;
      const size_t prompt = c / static_cast<size_t>(cr.n);
      std::string text;
      json lp = nullptr;
      LogprobsJson lj;
      lj.set_offset(offset[c]);
      if (!started[c]) {
        started[c] = true;
        if (cr.echo) {
          text = p.echo_text[prompt];
          if (cr.logprobs >= 0) add_prompt_tokens(*ctx, cr, lj, cr.prompts[prompt], d.prompt_logprobs);
        }
      }
      std::vector<int32_t> tokens;
      if (!p.discard_output) {
        text += d.text;
        tokens = d.tokens;
        if (cr.logprobs >= 0)
          for (const engine::TokenLogprob& t : d.logprobs) add_token(*ctx, cr, lj, t);
        completion_tokens[c] = d.completion_tokens;
        rec->output_tokens = std::accumulate(completion_tokens.begin(), completion_tokens.end(), int64_t{0});
      }
      if (!d.tokens.empty()) rec->first_token();
      const std::string finish = d.finish_reason.empty() ? "" : (p.discard_output ? "length" : d.finish_reason);
      if (text.empty() && tokens.empty() && finish.empty() && lj.empty()) continue;
      if (cr.logprobs >= 0) lp = lj.json();
      offset[c] = lj.offset();
      json chunk = completion_json(id, created, ctx->opt.model_name,
                                   json::array({choice_json(c, text, tokens, lp, finish)}), std::nullopt);
      if (cr.include_usage) chunk["usage"] = nullptr;
      if (!write(dump_json(chunk))) {
        gen->abort();
        return false;
      }
    }
    if (gen->finished()) return finish_stream(true);
  }
}

void handle(ServerContext& ctx, const httplib::Request&, httplib::Response& res, const std::string& body,
            const std::shared_ptr<RequestRecord>& rec) {
  Prepared p;
  try {
    p = prepare(ctx, body);
  } catch (const BadRequest& e) {
    return send_error(res, 400, e.what(), e.param);
  }
  const std::string id = next_id();
  rec->id = id;
  rec->prompt_tokens = p.prompt_tokens;
  TextOptions text{p.cr.stop, p.cr.include_stop_str_in_output, p.cr.skip_special_tokens};
  std::unique_ptr<Generation> gen;
  try {
    gen = std::make_unique<Generation>(ctx.loop, ctx.opt.decode, p.seqs, text);
  } catch (const QueueFull& e) {
    res.set_header("Retry-After", "1");
    return send_error(res, 503, e.what());
  } catch (const ShuttingDown& e) {
    return send_error(res, 503, e.what());
  }
  if (!p.cr.stream) return respond_whole(ctx, p, *gen, id, res, *rec);

  auto st = std::make_shared<StreamState>();
  st->ctx = &ctx;
  st->gen = std::move(gen);
  st->id = id;
  st->created = unix_time();
  st->rec = rec;
  const size_t choices = p.cr.prompts.size() * static_cast<size_t>(p.cr.n);
  st->offset.assign(choices, 0);
  st->started.assign(choices, false);
  st->completion_tokens.assign(choices, 0);
  st->p = std::move(p);
  serve_sse(
      res, [st](httplib::DataSink& sink) { return st->run(sink); }, [st] { st->gen->abort(); });
}

}  // namespace

void add_completion_routes(ServerContext& ctx) {
  ctx.post("/v1/completions", [&ctx](const httplib::Request& req, httplib::Response& res, const std::string& body,
                                     const std::shared_ptr<RequestRecord>& rec) { handle(ctx, req, res, body, rec); });
}

}  // namespace dsa::server
