// `dsa generate --model DIR (--prompt-ids 1,2,3 | --prompt TEXT) --max-tokens N [--device cpu|cuda[:i]]`:
// generation of one request through the engine, greedy unless --temperature > 0 (with --top-k,
// --top-p, --seed) (engine/engine.h: the prompt prefilled in
// chunks of --max-num-batched-tokens, then one step per new token, sampled on the device). Prints
// the generated ids (and, for --prompt, the decoded text: the checkpoint's tokenizer.json or
// --tokenizer, special tokens added to the prompt as for completions) and the timings (prefill
// ms, decode tok/s).
// On CUDA the kernels are tuned and warmed up first (tune/model_warmup.h): the tuning cache in
// $DSA_CACHE_DIR (else $XDG_CACHE_HOME/dsa, ~/.cache/dsa) is loaded, buckets it lacks are tuned
// within --tune-seconds and saved, and the forwards run the tuned tactics. --no-tune uses the
// cached entries only. --tensor-parallel-size N shards a GLM-5.1 or DeepSeek-V4 model
// over N ranks of this process (docs/parallelism.md).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli_args.h"
#include "commands.h"
#include "model_load.h"
#include "dsa/core/device.h"
#include "dsa/core/error.h"
#include "dsa/engine/engine.h"
#include "dsa/engine/sampler.h"
#include "dsa/engine/session.h"
#include "dsa/model/causal_lm.h"
#include "dsa/model/config.h"
#include "dsa/tokenizer/tokenizer.h"
#include "dsa/tune/bucket.h"
#include "dsa/tune/model_warmup.h"

namespace dsa::cli {
namespace {

struct Args {
  std::string model, prompt_ids, device = "cpu", prompt_text, tokenizer;
  int max_tokens = 16;
  bool tune = true, enforce_eager = false;
  double tune_seconds = 60;
  int show_top = 0;                // > 0: print the K highest logits of every step (debugging divergence)
  int64_t max_step_tokens = 8192;  // prompt chunk of one step
  int64_t max_model_len = 0;       // 0: prompt + max_tokens
  double gpu_memory_utilization = 0.9;
  size_t kv_cache_memory = 0;
  int speculative_tokens = 0;      // MTP drafts per step (docs/speculative-decoding.md)
  std::string speculative_acceptance = "rejection";  // how sampled drafts are verified
  double temperature = 0, top_p = 1;  // sampling (0: greedy)
  int64_t top_k = 0;
  std::optional<uint64_t> seed;
  int tensor_parallel = 1;         // ranks (docs/parallelism.md)
  DistArgs dist;                   // --nnodes: one rank per process
  LoadFormatArgs load;             // --load-format, --layers
};

// Greedy choice; a NaN / Inf logit (broken weights or arithmetic) is an error, not token 0.
int32_t argmax(const float* p, int64_t n, int step) {
  if (const int64_t bad = engine::first_non_finite(p, n); bad >= 0)
    fail("generate: step {}: the model produced a non-finite logit ({} for token id {}): broken weights or "
         "arithmetic (`dsa check-model` scans the weights for NaN / Inf)",
         step, p[bad], bad);
  return engine::argmax_token(p, n);
}

// Loads the tuning cache, tunes what it lacks (unless --no-tune), installs the active tuning.
// Runs before the model is loaded: the tuner's buffers (paged caches, one layer of experts) are
// freed before the weights take the memory. Limits: one sequence, steps of up to the prompt
// chunk rounded up to a power of two, so the buckets are the ones `dsa tune` writes too.
void tune_for_generate(const Args& a, Device dev, size_t chunk) {
  if (dev.index < 0 || dev.index >= static_cast<int>(cuda_devices().size())) return;  // the loader says why
  tune::ModelWarmupOptions o;
  o.tune = a.tune;
  o.max_seconds = a.tune_seconds;
  const tune::EngineLimits limits{tune::next_pow2(static_cast<int64_t>(chunk)), 1};
  const tune::PlanModel pm =
      tune::plan_model_from_config(model::model_config_for_load(a.model, a.load.source().format, a.load.layers));
  tune::warm_up_for_model(pm, dev.index, limits, o);  // logs its one-line summary
}

// "step 0: 44 (3.1416), 96 (3.1402), ..." : the K highest logits, best first.
void print_top(int step, const float* p, int64_t n, int k) {
  std::vector<int32_t> ids(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) ids[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  k = static_cast<int>(std::min<int64_t>(k, n));
  std::partial_sort(ids.begin(), ids.begin() + k, ids.end(), [&](int32_t x, int32_t y) { return p[x] > p[y]; });
  std::string line;
  for (int i = 0; i < k; ++i) line += fmt::format("{}{} ({:.5f})", i ? ", " : "", ids[i], p[ids[i]]);
  std::printf("step %d: %s\n", step, line.c_str());
}

// --show-top: the logits of every step are needed, so the steps run through a session (the
// forward's logits come back to the host) and the argmax is taken there.
std::vector<int32_t> generate_showing_logits(model::CausalLM& lm, const std::vector<int32_t>& prompt, const Args& a) {
  const int64_t V = lm.config().vocab_size;
  engine::SessionOptions so;
  so.max_requests = 1;
  so.max_step_tokens = static_cast<int64_t>(prompt.size());
  so.kv_blocks = (static_cast<int64_t>(prompt.size()) + a.max_tokens) / 16 + 8;
  engine::Session session(lm, so);
  const kv::RequestId id = session.add_request();
  const engine::ForwardBatch b = engine::ForwardBatch::of(id, prompt);
  Tensor logits = session.forward(b);
  std::vector<int32_t> out{argmax(logits.data<float>(), V, 0)};
  print_top(0, logits.data<float>(), V, a.show_top);
  for (int i = 1; i < a.max_tokens; ++i) {
    engine::ForwardBatch d{{out.back()}, {id}, {static_cast<int64_t>(prompt.size() + out.size() - 1)}};
    logits = session.forward(d);
    out.push_back(argmax(logits.data<float>(), V, i));
    print_top(i, logits.data<float>(), V, a.show_top);
  }
  return out;
}

void run(const Args& a) {
  using clock = std::chrono::steady_clock;
  const model::WeightSource source = a.load.source();  // a bad --load-format fails before any work
  DSA_CHECK(a.prompt_ids.empty() != a.prompt_text.empty(), "generate: give --prompt-ids or --prompt (one of them)");
  std::unique_ptr<Tokenizer> tok;
  if (!a.prompt_text.empty()) tok = Tokenizer::load(a.tokenizer.empty() ? a.model : a.tokenizer);
  const std::vector<int32_t> prompt =
      tok ? tok->encode(a.prompt_text, /*add_special_tokens=*/true) : parse_token_ids(a.prompt_ids, "--prompt-ids");
  DSA_CHECK(!prompt.empty(), "generate: --prompt encodes to no tokens");
  DSA_CHECK(a.max_tokens >= 1, "--max-tokens must be >= 1, got {}", a.max_tokens);
  DSA_CHECK(a.tune_seconds >= 0, "--tune-seconds must be >= 0, got {}", a.tune_seconds);
  DSA_CHECK(a.max_step_tokens >= 1, "--max-num-batched-tokens must be >= 1, got {}", a.max_step_tokens);
  const engine::SpecAcceptance acceptance = engine::parse_spec_acceptance(a.speculative_acceptance);
  DSA_CHECK(a.show_top == 0 || a.temperature == 0, "--show-top decodes greedily: drop --temperature ({})",
            a.temperature);
  const Device dev = parse_device(a.device);
  if (dev.is_cuda()) tune_for_generate(a, dev, std::min<size_t>(prompt.size(), static_cast<size_t>(a.max_step_tokens)));
  auto t0 = clock::now();
  DSA_CHECK(a.show_top == 0 || a.tensor_parallel == 1,
            "generate: --show-top runs one model without the engine; it does not take --tensor-parallel-size {}",
            a.tensor_parallel);
  LoadedModel m = load_model(a.model, dev, a.tensor_parallel, {.mtp = a.speculative_tokens > 0, .weights = source},
                             a.speculative_tokens, a.dist);
  if (m.follower()) return m.serve_rank_steps();  // rank 0's process generates
  model::CausalLM* lm = &m.lm();
  const double load_s = std::chrono::duration<double>(clock::now() - t0).count();
  if (a.show_top > 0) {
    const std::vector<int32_t> out = generate_showing_logits(*lm, prompt, a);
    std::printf("ids: %s\n", fmt::format("{}", fmt::join(out, ",")).c_str());
    if (tok) std::printf("text: %s\n", tok->decode(out, /*skip_special_tokens=*/true).c_str());
    return;
  }

  engine::EngineOptions eo;
  eo.max_running = 1;
  eo.max_step_tokens = a.max_step_tokens;
  eo.max_model_len = a.max_model_len > 0 ? a.max_model_len : static_cast<int64_t>(prompt.size()) + a.max_tokens;
  eo.memory.gpu_memory_utilization = a.gpu_memory_utilization;
  eo.memory.kv_cache_bytes = a.kv_cache_memory;
  eo.cuda_graphs = !a.enforce_eager;
  eo.speculative_tokens = a.speculative_tokens;
  eo.speculative_acceptance = acceptance;
  const std::unique_ptr<engine::Engine> owned_engine = m.engine(eo);
  engine::Engine& eng = *owned_engine;
  engine::SamplingParams sp;
  sp.max_tokens = a.max_tokens;
  sp.ignore_eos = true;
  sp.temperature = a.temperature;
  sp.top_k = a.top_k;
  sp.top_p = a.top_p;
  sp.seed = a.seed;
  eng.add_request(prompt, sp);
  std::vector<int32_t> out;
  double prefill_ms = 0;
  t0 = clock::now();
  auto t_first = t0;
  while (eng.has_unfinished()) {
    for (const engine::StepOutput& o : eng.step()) {
      if (out.empty() && !o.new_tokens.empty()) {
        t_first = clock::now();
        prefill_ms = std::chrono::duration<double, std::milli>(t_first - t0).count();
      }
      out.insert(out.end(), o.new_tokens.begin(), o.new_tokens.end());
      DSA_CHECK(o.finish != engine::FinishReason::Error, "generate: {}", o.error);
    }
  }
  const double decode_s = std::chrono::duration<double>(clock::now() - t_first).count();
  std::printf("ids: %s\n", fmt::format("{}", fmt::join(out, ",")).c_str());
  if (tok) std::printf("text: %s\n", tok->decode(out, /*skip_special_tokens=*/true).c_str());
  std::printf("load %.2f s; prefill %zu tokens %.1f ms (%.1f tok/s); decode %d tokens %.1f ms (%.2f tok/s) on %s\n",
              load_s, prompt.size(), prefill_ms, prompt.size() / (prefill_ms / 1e3), a.max_tokens - 1, decode_s * 1e3,
              a.max_tokens > 1 ? (a.max_tokens - 1) / decode_s : 0.0,
              (lm->device().str() + (m.tp_size() > 1 ? fmt::format(" x {} ranks", m.tp_size()) : "")).c_str());
  if (a.speculative_tokens > 0) {
    const engine::SpecStats& st = eng.spec_stats();
    std::printf("speculative: %d tokens per step (%s acceptance); %lld drafted, %lld accepted (acceptance rate %.3f), mean accepted "
                "length %.2f over %lld verify steps, %lld rollbacks\n",
                a.speculative_tokens, engine::spec_acceptance_name(acceptance), static_cast<long long>(st.drafted), static_cast<long long>(st.accepted),
                st.acceptance_rate(), st.mean_accepted_length(), static_cast<long long>(st.verify_steps),
                static_cast<long long>(st.rollbacks));
  }
}

const bool registered = add_command([](CLI::App& app) {
  auto* cmd = app.add_subcommand("generate",
                                 "Generation from token ids or text, greedy unless --temperature (prints ids, text "
                                 "and timings)");
  auto a = std::make_shared<Args>();
  cmd->add_option("--model", a->model,
                  "Checkpoint directory (config.json + safetensors); with --load-format dummy also a directory with "
                  "only config.json or a built-in name")
      ->required();
  add_load_format_options(cmd, a->load);
  cmd->add_option("--prompt-ids", a->prompt_ids, "Comma-separated prompt token ids");
  cmd->add_option("--prompt", a->prompt_text, "Prompt text (encoded with the checkpoint's tokenizer.json)");
  cmd->add_option("--tokenizer", a->tokenizer, "tokenizer.json (or its directory) for --prompt; default: the model dir's");
  cmd->add_option("--max-tokens", a->max_tokens, "Tokens to generate (default 16)");
  cmd->add_option("--device", a->device, "cpu (default), cuda or cuda:N");
  cmd->add_flag("--tune,!--no-tune", a->tune,
                "CUDA: tune kernel tactics missing from the tuning cache before generating (default: on; the cache "
                "in $DSA_CACHE_DIR keeps them, so only the first run on a device pays, and it is bounded by "
                "--tune-seconds). --no-tune: use cached tactics only (no tuning, no warm-up launches)");
  cmd->add_option("--tune-seconds", a->tune_seconds,
                  "CUDA: time bound of tuning and warm-up; buckets left over run the default tactic (0 = none)")
      ->capture_default_str();
  cmd->add_option("--show-top", a->show_top, "Print the K highest logits of every step (ids and values)");
  cmd->add_option("--max-num-batched-tokens,--max-step-tokens", a->max_step_tokens,
                  "Tokens of one step: longer prompts are prefilled in chunks of this size")
      ->capture_default_str();
  cmd->add_option("--max-model-len", a->max_model_len, "Context the KV cache must hold (0: prompt + max tokens)");
  cmd->add_option("--gpu-memory-utilization", a->gpu_memory_utilization,
                  "CUDA: fraction of device memory dsa may use in all (weights + KV cache + activations)")
      ->capture_default_str();
  cmd->add_option("--kv-cache-memory", a->kv_cache_memory, "KV cache bytes (overrides --gpu-memory-utilization)");
  cmd->add_flag("--enforce-eager", a->enforce_eager,
                "CUDA: run every step eagerly (default: decode steps whose shape repeats replay as CUDA graphs)");
  cmd->add_option("--speculative-tokens", a->speculative_tokens,
                  "Tokens the checkpoint's MTP layer drafts per step, verified in one forward (default 0: off)");
  cmd->add_option("--speculative-acceptance", a->speculative_acceptance,
                  "How sampled drafts are verified: rejection (rejection sampling: the target's distribution, more "
                  "accepted drafts) or exact (the same tokens as without drafts for a seeded request)")
      ->capture_default_str();
  cmd->add_option("--temperature", a->temperature, "Sampling temperature (default 0: greedy)");
  cmd->add_option("--top-k", a->top_k, "Sample among the K most probable tokens (0: all)");
  cmd->add_option("--top-p", a->top_p, "Nucleus sampling: the smallest set of tokens with this much probability (1: all)");
  cmd->add_option("--seed", a->seed, "Sampling seed (default: random)");
  cmd->add_option("--tensor-parallel-size", a->tensor_parallel,
                  "Ranks the model is sharded over (GLM-5.1 or DeepSeek-V4; threads of this process, rank r on device --device + r "
                  "when there are that many, else all on --device; or one per process with --nnodes)")
      ->capture_default_str();
  add_dist_options(cmd, a->dist);
  cmd->callback([a] { run(*a); });
});

}  // namespace
}  // namespace dsa::cli
