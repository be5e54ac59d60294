// GET /health, GET /metrics (open: no API key), GET /v1/models, GET /v1/models/{id}, and vLLM's
// POST /tokenize {"prompt": text, "add_special_tokens"?} -> {"tokens", "count", "max_model_len"}
// and POST /detokenize {"tokens": ids} -> {"prompt": text} (404 without a tokenizer).
#include "dsa/core/device.h"
#include "dsa/server/routes.h"

namespace dsa::server {
namespace {

using json = nlohmann::json;
using Req = httplib::Request;
using Res = httplib::Response;
using Rec = std::shared_ptr<RequestRecord>;

json model_card(const ServerContext& ctx) {
  return {{"id", ctx.opt.model_name},
          {"object", "model"},
          {"created", unix_time()},
          {"owned_by", "dsa"},
          {"root", ctx.opt.model_name},
          {"max_model_len", ctx.engine.max_model_len()}};
}

std::string metrics_text(const ServerContext& ctx) {
  const LoopStats& st = ctx.loop.stats();
  PromWriter w;
  w.gauge("dsa_requests_running", "Sequences holding model state.", static_cast<double>(st.running));
  w.gauge("dsa_requests_waiting", "Sequences queued for admission (preempted ones included).",
          static_cast<double>(st.waiting));
  w.counter("dsa_preemptions_total", "Sequences preempted because the KV cache was full.",
            static_cast<double>(st.preemptions));
  // Speculative decoding (--speculative-tokens): vLLM's spec_decode counters.
  w.counter("dsa_spec_decode_num_drafts_total", "Verifications: request-steps that verified MTP drafts.",
            static_cast<double>(st.spec_verify_steps));
  w.counter("dsa_spec_decode_num_draft_tokens_total", "Draft tokens verified.", static_cast<double>(st.spec_drafted));
  w.counter("dsa_spec_decode_num_accepted_tokens_total", "Draft tokens accepted.",
            static_cast<double>(st.spec_accepted));
  w.gauge("dsa_spec_decode_acceptance_rate", "Accepted / drafted tokens since start (0 without drafts).",
          st.spec_drafted > 0 ? static_cast<double>(st.spec_accepted) / static_cast<double>(st.spec_drafted) : 0.0);
  w.gauge("dsa_spec_decode_mean_accepted_length", "Tokens per verification: 1 + accepted / verifications.",
          st.spec_verify_steps > 0 ? 1.0 + static_cast<double>(st.spec_accepted) / static_cast<double>(st.spec_verify_steps)
                                   : 0.0);
  w.counter("dsa_engine_steps_total", "Engine steps (forwards).", static_cast<double>(st.steps));
  w.counter("dsa_cuda_graph_captures_total", "Step shapes captured as CUDA graphs.",
            static_cast<double>(st.graph_captures));
  w.counter("dsa_cuda_graph_replays_total", "Engine steps replayed from a CUDA graph.",
            static_cast<double>(st.graph_replays));
  w.counter("dsa_prompt_tokens_total", "Prompt tokens of finished sequences.", static_cast<double>(st.prompt_tokens));
  w.counter("dsa_generation_tokens_total", "Generated tokens.", static_cast<double>(st.generated_tokens));
  for (engine::FinishReason r : {engine::FinishReason::Stop, engine::FinishReason::Length, engine::FinishReason::Abort,
                                 engine::FinishReason::Error})
    w.counter("dsa_requests_finished_total", "Finished sequences by finish reason.",
              static_cast<double>(st.finished[static_cast<int>(r)]), {{"reason", engine::finish_reason_name(r)}});
  const auto kv = ctx.loop.kv_usage();
  for (const auto& g : kv)
    w.gauge("dsa_kv_cache_usage_ratio", "Fraction of the KV cache pages in use, per cache group.",
            g.total_pages > 0 ? static_cast<double>(g.used_pages) / static_cast<double>(g.total_pages) : 0.0,
            {{"group", g.group}});
  for (const auto& g : kv)
    w.gauge("dsa_kv_cache_used_pages", "KV cache pages in use, per cache group.", static_cast<double>(g.used_pages),
            {{"group", g.group}});
  for (const auto& g : kv)
    w.gauge("dsa_kv_cache_total_pages", "KV cache pages, per cache group.", static_cast<double>(g.total_pages),
            {{"group", g.group}});
  w.histogram("dsa_time_to_first_token_seconds", "Time from submission to the first token, per sequence.",
              ctx.metrics.ttft);
  w.histogram("dsa_inter_token_latency_seconds", "Time between consecutive tokens of a sequence.",
              ctx.metrics.inter_token);
  w.histogram("dsa_e2e_request_latency_seconds", "Time from submission to the finish, per sequence.",
              ctx.metrics.e2e);
  w.histogram("dsa_request_queue_time_seconds", "Time from submission to the first step that runs the sequence.",
              ctx.metrics.queue_time);
  for (const auto& [status, n] : ctx.metrics.responses())
    w.counter("dsa_http_responses_total", "HTTP responses by status.", static_cast<double>(n),
              {{"status", std::to_string(status)}});
  const BuildInfo b = build_info();
  w.gauge("dsa_build_info", "Build of this server (the value is always 1).", 1,
          {{"version", b.version}, {"cuda", b.cuda ? "true" : "false"}, {"cuda_archs", b.cuda_archs}});
  return w.text();
}

}  // namespace

void add_basic_routes(ServerContext& ctx) {
  ctx.get("/health", [](const Req&, Res& res, const std::string&, const Rec&) { send_json(res, 200, {{"status", "ok"}}); },
          /*open=*/true);
  ctx.get("/metrics", [&ctx](const Req&, Res& res, const std::string&, const Rec&) {
    res.set_content(metrics_text(ctx), "text/plain; version=0.0.4; charset=utf-8");
  }, /*open=*/true);

  ctx.get("/v1/models", [&ctx](const Req&, Res& res, const std::string&, const Rec&) {
    send_json(res, 200, {{"object", "list"}, {"data", json::array({model_card(ctx)})}});
  });
  ctx.get(R"(/v1/models/(.+))", [&ctx](const Req& req, Res& res, const std::string&, const Rec&) {
    const std::string id = req.matches[1];
    if (id != ctx.opt.model_name)
      return send_error(res, 404, "the model '" + id + "' does not exist (this server serves '" + ctx.opt.model_name + "')",
                        "model");
    send_json(res, 200, model_card(ctx));
  });

  ctx.post("/tokenize", [&ctx](const Req&, Res& res, const std::string& body, const Rec&) {
    if (!ctx.opt.encode) return send_error(res, 404, "this server has no tokenizer");
    const json j = json::parse(body, nullptr, false);
    if (!j.is_object() || !j.contains("prompt") || !j["prompt"].is_string())
      return send_error(res, 400, "prompt must be a string", "prompt");
    bool special = true;
    if (j.contains("add_special_tokens") && !j["add_special_tokens"].is_null()) {
      if (!j["add_special_tokens"].is_boolean())
        return send_error(res, 400, "add_special_tokens must be a boolean", "add_special_tokens");
      special = j["add_special_tokens"].get<bool>();
    }
    std::vector<int32_t> ids;
    try {
      ids = ctx.opt.encode(j["prompt"].get<std::string>(), special);
    } catch (const std::exception& e) {
      return send_error(res, 400, std::string("prompt: cannot tokenize: ") + e.what(), "prompt");
    }
    send_json(res, 200, {{"tokens", ids}, {"count", ids.size()}, {"max_model_len", ctx.engine.max_model_len()}});
  });
  ctx.post("/detokenize", [&ctx](const Req&, Res& res, const std::string& body, const Rec&) {
    if (!ctx.opt.decode) return send_error(res, 404, "this server has no tokenizer");
    const json j = json::parse(body, nullptr, false);
    if (!j.is_object() || !j.contains("tokens") || !j["tokens"].is_array())
      return send_error(res, 400, "tokens must be an array of token ids", "tokens");
    std::vector<int32_t> ids;
    const int64_t V = ctx.engine.config().vocab_size;
    for (const json& t : j["tokens"]) {
      if (!t.is_number_integer() || t.get<int64_t>() < 0 || t.get<int64_t>() >= V)
        return send_error(res, 400, "tokens: " + t.dump() + " is not a token id in [0, " + std::to_string(V) + ")",
                          "tokens");
      ids.push_back(static_cast<int32_t>(t.get<int64_t>()));
    }
    std::string text;
    try {
      text = ctx.opt.decode(ids, true);
    } catch (const std::exception& e) {
      return send_error(res, 400, std::string("tokens: cannot decode: ") + e.what(), "tokens");
    }
    send_json(res, 200, {{"prompt", text}});
  });
}

}  // namespace dsa::server
