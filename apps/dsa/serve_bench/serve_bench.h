// `dsa bench serve`: the serving benchmark (the measurements of `vllm bench serve`) against any
// OpenAI-compatible /v1/completions endpoint. Requests stream (stream_options.include_usage);
// per request it records the time to the first token (TTFT), the gaps between content chunks
// (ITL), the time per output token after the first (TPOT = (E2E - TTFT) / (output - 1)) and the
// end-to-end latency (E2E); output tokens come from the usage chunk (else the chunks counted).
// Arrivals: all at once (request rate inf) or a gamma process of the given rate (burstiness 1:
// Poisson), optionally at most max_concurrency in flight.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dsa::bench {

struct ServeBenchOptions {
  std::string base_url = "http://127.0.0.1:8000";
  std::string endpoint = "/v1/completions";
  std::string model;    // "" = the first model of GET /v1/models
  std::string api_key;  // Bearer token, when the server wants one
  std::string dataset = "random";  // random | file
  std::string dataset_path;        // file: JSON lines {"prompt": text or ids, "max_tokens"?} or plain text lines
  int64_t num_prompts = 100;
  int64_t input_len = 1024, output_len = 128;  // random prompts: token ids, and max_tokens
  double range_ratio = 0;                      // random lengths uniform in [len * (1 - r), len * (1 + r)]
  int64_t vocab_size = 10000;                  // random ids are drawn from [10, vocab_size)
  double request_rate = 0;                     // requests / s; 0 or inf: all at once
  double burstiness = 1;                       // gamma shape of the inter-arrival times (1: Poisson)
  int64_t max_concurrency = 0;                 // 0: unbounded
  bool ignore_eos = false;                     // send ignore_eos (vLLM / dsa extension): outputs of output_len
  uint64_t seed = 0;
  double request_timeout_s = 600;
  bool progress = true;
  std::string json_path;  // write the results here

  void validate() const;  // throws dsa::Error naming the option and value
};

struct ServeBenchRequest {
  nlohmann::json prompt;  // a string or an array of token ids
  int64_t input_tokens = 0;  // ids sent, or the server's usage.prompt_tokens for text
  int64_t max_tokens = 0;
};

// The prompts of the run (random ids, or the file's), reproducible from the seed.
std::vector<ServeBenchRequest> make_requests(const ServeBenchOptions& o);

// Runs the benchmark, prints the table on stdout, writes JSON when asked; returns the results
// (the JSON object). Throws dsa::Error when the server cannot be reached at all.
nlohmann::json run_serve_bench(const ServeBenchOptions& o);

// Percentile p in [0, 100] of values (linear interpolation, as numpy); 0 for none.
double percentile(std::vector<double> values, double p);

}  // namespace dsa::bench
