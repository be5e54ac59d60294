// `dsa bench serve [--base-url http://127.0.0.1:8000] [--num-prompts N] [--random-input-len N]
// [--random-output-len N] [--request-rate R|inf] [--max-concurrency N] [--json FILE] ...`: the
// serving benchmark (serve_bench.h) against a running OpenAI-compatible server, `dsa serve` or
// any other. Option names follow `vllm bench serve`. Exit code 1 when a request failed.
#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "dsa/core/error.h"
#include "serve_bench.h"

namespace dsa::cli {
namespace {

const bool registered = add_bench_command([](CLI::App& bench) {
  auto* cmd = bench.add_subcommand("serve", "Serving benchmark against an OpenAI-compatible server (TTFT, TPOT, ITL, E2E, "
                                            "throughput; table + JSON)");
  auto o = std::make_shared<bench::ServeBenchOptions>();
  auto rate = std::make_shared<std::string>("inf");
  auto host = std::make_shared<std::string>();
  auto port = std::make_shared<int>(0);
  auto no_progress = std::make_shared<bool>(false);
  cmd->add_option("--base-url", o->base_url, "Server URL (http://host:port)")->capture_default_str();
  cmd->add_option("--host", *host, "Server host (instead of --base-url)");
  cmd->add_option("--port", *port, "Server port (with --host; default 8000)");
  cmd->add_option("--endpoint", o->endpoint, "Completions path")->capture_default_str();
  cmd->add_option("--model", o->model, "Model name to send (default: the first of /v1/models)");
  cmd->add_option("--api-key", o->api_key, "Bearer token")->envname("OPENAI_API_KEY");
  cmd->add_option("--dataset-name", o->dataset, "random (token-id prompts) or file")->capture_default_str();
  cmd->add_option("--dataset-path", o->dataset_path, "file: JSON lines {\"prompt\": text or ids, \"max_tokens\"?} or text lines");
  cmd->add_option("--num-prompts", o->num_prompts, "Requests to send")->capture_default_str();
  cmd->add_option("--random-input-len", o->input_len, "Prompt tokens (random dataset)")->capture_default_str();
  cmd->add_option("--random-output-len", o->output_len, "max_tokens per request")->capture_default_str();
  cmd->add_option("--random-range-ratio", o->range_ratio, "Lengths uniform in len * [1 - r, 1 + r]")->capture_default_str();
  cmd->add_option("--random-vocab-size", o->vocab_size, "Random prompt ids are drawn from [10, N)")->capture_default_str();
  cmd->add_option("--request-rate", *rate, "Requests per second (Poisson with --burstiness 1), or inf: all at once")
      ->capture_default_str();
  cmd->add_option("--burstiness", o->burstiness, "Gamma shape of the arrival gaps (1: Poisson)")->capture_default_str();
  cmd->add_option("--max-concurrency", o->max_concurrency, "Requests in flight at most (0: no bound)")->capture_default_str();
  cmd->add_flag("--ignore-eos", o->ignore_eos, "Send ignore_eos so every request makes its max_tokens");
  cmd->add_option("--seed", o->seed, "Seed of the random prompts and arrivals")->capture_default_str();
  cmd->add_option("--request-timeout", o->request_timeout_s, "Seconds a request may take")->capture_default_str();
  cmd->add_option("--json", o->json_path, "Write the results as JSON to this file");
  cmd->add_flag("--no-progress", *no_progress, "No progress bar");
  cmd->callback([o, rate, host, port, no_progress] {
#ifdef DSA_WITH_SERVER
    if (*rate == "inf" || *rate == "Infinity") {
      o->request_rate = 0;
    } else {
      try {
        o->request_rate = std::stod(*rate);
      } catch (const std::exception&) {
        fail("--request-rate: '{}' (expected a number or inf)", *rate);
      }
    }
    if (!host->empty()) o->base_url = "http://" + *host + ":" + std::to_string(*port > 0 ? *port : 8000);
    o->progress = !*no_progress;
    const auto r = bench::run_serve_bench(*o);
    if (r["failed"].get<int64_t>() > 0) set_exit_code(1);
#else
    (void)o;
    (void)rate;
    (void)host;
    (void)port;
    (void)no_progress;
    fail("dsa bench serve: this build has no HTTP client (configured without cpp-httplib)");
#endif
  });
});

}  // namespace
}  // namespace dsa::cli
