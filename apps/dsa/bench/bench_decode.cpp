// `dsa bench decode`: decode steps of a whole model through the engine (model runner, device
// sampling), at several batch sizes after a prompt of --context tokens per request (several
// contexts: one table row set per context x batch). Per layer kind
// (DeepSeek-V4 swa / csa / hca, GLM-5.1 dense / moe) it reports the device time per layer (CUDA
// events at the model's layer boundaries, median over layers of the kind and timed steps), the
// layer's weight bytes plus the KV bytes the step reads, the HBM floor of those bytes at the copy
// bandwidth measured in the same run, and the ratio to it. Per step: device time, host time
// (until the step's work is enqueued), wall time, the nodes of the step captured as a CUDA graph
// (kernels + copies + memsets: the launches), and the full-model decode rate extrapolated from
// the layer mix of the real config (DeepSeek-V4-Flash 43 layers, -Pro 61, GLM-5.1 78). The
// weight bytes of a MoE layer count only the routed experts a step of B tokens is expected to
// touch (uniform random top-k, as fast-filled weights route); the floor streams the bytes at the
// device-to-device copy rate measured in the same run (bytes read + written per second), the
// rate a pure read stream also reaches on the H200. Per context x batch, the wall time of the
// chunked prefill of the prompts up to every request's first token (prompt tok/s; long-context
// prefill is measured this way), after an untimed warm-up request of one prefill chunk.
// --tensor-parallel-size N shards a GLM-5.1 or DeepSeek-V4 model over N ranks (docs/parallelism.md): steps run
// eagerly, the layer times and weight bytes are rank 0's, and allreduce_KB is rank 0's all-reduce
// payload per step.
// --speculative-tokens N[,N...] (speculative decoding with the MTP layer, docs/speculative-
// decoding.md) adds, per context x batch x graph mode, each N after N = 0 (the reference, rows
// tagged N=0): the engine runs with every draft accepted (EngineOptions::benchmark_accept_all_drafts,
// a benchmark mode: random weights accept nearly nothing), so every step is a steady-state round:
// the verification of B x (N + 1) tokens through the target (checked; per layer kind and whole,
// as the plain step: device time, floor, host time, launches, graph replays, x_N0 = its time over
// the N = 0 step's), draft step 1 (the MTP layer over the N + 1 committed positions of every
// request, B x (N + 1) tokens, giving the first draft) and draft steps 2..N (B tokens each), the
// round (verify + N drafts: device time, host time, wall time of the engine step) with the
// speed-up of the engine's rate over N = 0's at per-draft acceptance a = 0.6 .. 0.9 (expected
// tokens per round (1 - a^(N + 1)) / (1 - a), wall times), and on CUDA the full model
// extrapolated: the verification at the real layer mix plus the N draft steps as measured, its
// tok/s and speed-up over N = 0's extrapolated step at each a. Draft-step launches are counted
// only from captured / replayed graphs. The KV floor of a verification counts each request's
// context once (a lower bound: its N + 1 rows read mostly the same entries).
// Checkpoints: --model DIR, or --preset flash|pro|glm-5.1 (real shapes, --layers of them) or
// tiny-v4|tiny-glm (CPU smoke runs). A preset loads dummy weights (model/dummy_weights.h: filled
// on the device from the built-in config, nothing written) unless --load-format safetensors,
// which writes a fast-filled checkpoint first (/dev/shm when it has room, else the temporary
// directory; deleted once loaded). --model DIR --load-format dummy takes only DIR's config.json.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <sstream>

#include <unistd.h>

#include "bench/bench.h"
#include "bench/bench_util_gpu.h"
#include "model_load.h"
#include "dsa/core/device.h"
#include "dsa/core/error.h"
#include "dsa/core/log.h"
#include "dsa/engine/engine.h"
#include "dsa/engine/tp_ranks.h"
#include "dsa/model/causal_lm.h"
#include "dsa/model/checkpoint_tiny.h"
#include "dsa/model/config.h"
#include "dsa/model/load_format.h"

namespace dsa::bench {
namespace {

// A preset checkpoint in a temporary directory, removed afterwards.
struct TempCheckpoint {
  std::filesystem::path dir;
  ~TempCheckpoint() {
    if (!dir.empty()) std::filesystem::remove_all(dir);
  }
};

// Where the temporary checkpoint goes: /dev/shm (memory) when it has room for a few-layer
// real-shape checkpoint (V4-Flash 4 layers: 19 GB, GLM-5.1: 24 GB), since writing that to a disk
// takes minutes; otherwise the temporary directory.
std::filesystem::path scratch_root() {
  std::error_code ec;
  const std::filesystem::space_info shm = std::filesystem::space("/dev/shm", ec);
  if (!ec && shm.available >= (uint64_t{48} << 30)) return "/dev/shm";
  return std::filesystem::temp_directory_path();
}

std::string kind_of(const model::ModelConfig& c, int l) {
  if (c.arch == model::Arch::DeepseekV4) {
    const int r = c.compress_ratios.at(static_cast<size_t>(l));
    return r == 0 ? "swa" : r == 4 ? "csa" : "hca";
  }
  return l < c.first_k_dense_replace ? "dense" : "moe";
}

// KV-cache bytes one decode row reads in layer l at `ctx` tokens of context.
double kv_read_bytes(const model::ModelConfig& c, int l, int64_t ctx) {
  if (c.arch == model::Arch::DeepseekV4) {
    const int r = c.compress_ratios.at(static_cast<size_t>(l));
    double b = static_cast<double>(std::min<int64_t>(ctx, c.sliding_window)) * 584;
    if (r == 4) b += static_cast<double>(std::min<int64_t>(c.index_topk, ctx / 4)) * 584 + static_cast<double>(ctx / 4) * 132;
    if (r == 128) b += static_cast<double>(ctx / 128) * 584;
    return b;
  }
  return static_cast<double>(std::min<int64_t>(c.index_topk, ctx)) * 656 + static_cast<double>(ctx) * 132;
}

// Bytes of one routed expert (gate, up and down with their block scales) as the checkpoint stores
// it: MXFP4 (0.5 B per weight + a UE8M0 byte per 32) or FP8 (1 B + an f32 per 128x128 block).
double expert_bytes(const model::ModelConfig& c) {
  const double w = 3.0 * c.moe_intermediate_size * c.hidden_size;
  return c.quant.expert_dtype == "fp4" ? w * (0.5 + 1.0 / 32) : w * (1.0 + 4.0 / (128 * 128));
}

// Expected distinct experts a decode step of B tokens touches with top-k of E chosen uniformly at
// random (what fast-filled weights give): E (1 - (1 - k/E)^B).
double touched_experts(const model::ModelConfig& c, int64_t B) {
  const double E = c.n_routed_experts, k = c.num_experts_per_tok;
  return E <= 0 ? 0 : E * (1 - std::pow(1 - k / E, static_cast<double>(B)));
}

// The most drafts per step the engine takes (EngineOptions::validate).
constexpr int64_t kMaxSpeculativeTokens = 64;

bool has_routed_experts(const model::ModelConfig& c, int l) {
  return c.n_routed_experts > 0 && (c.arch == model::Arch::DeepseekV4 || l >= c.first_k_dense_replace);
}

// A comma-separated list of counts in [lo, hi] for `flag`; K and M suffixes multiply by 1024 and
// 1048576.
std::vector<int64_t> parse_list(const std::string& s, const char* flag, int64_t hi, int64_t lo = 1) {
  std::vector<int64_t> v;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    DSA_CHECK(!item.empty(), "{} '{}': empty item", flag, s);
    int64_t mult = 1;
    std::string digits = item;
    if (digits.back() == 'K' || digits.back() == 'k') mult = 1024;
    if (digits.back() == 'M' || digits.back() == 'm') mult = 1024 * 1024;
    if (mult > 1) digits.pop_back();
    const bool numeric = !digits.empty() && digits.size() <= 9 &&
                         std::all_of(digits.begin(), digits.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
    const int64_t x = numeric ? std::stoll(digits) * mult : -1;
    DSA_CHECK(numeric && x >= lo && x <= hi, "{} '{}': '{}' is not a count in [{}, {}]", flag, s, item, lo, hi);
    v.push_back(x);
  }
  DSA_CHECK(!v.empty(), "{} is empty", flag);
  return v;
}

// The draft counts measured: N = 0 (the reference of the speed-ups) and every N of
// --speculative-tokens, ascending, each once. Only {0} without the option.
std::vector<int> draft_counts(const std::string& spec) {
  std::vector<int> ns{0};
  if (spec.empty()) return ns;
  for (const int64_t n : parse_list(spec, "--speculative-tokens", kMaxSpeculativeTokens, 0))
    ns.push_back(static_cast<int>(n));
  std::sort(ns.begin(), ns.end());
  ns.erase(std::unique(ns.begin(), ns.end()), ns.end());
  return ns;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The layer kinds of the real model a preset stands for, with counts.
std::map<std::string, int> real_layer_mix(const model::ModelConfig& measured, const std::string& preset) {
  model::ModelConfig real = measured;
  if (preset == "flash") real = model::builtin_model_config("deepseek-v4-flash");
  if (preset == "pro") real = model::builtin_model_config("deepseek-v4-pro");
  if (preset == "glm-5.1") real = model::builtin_model_config("glm-5.1");
  std::map<std::string, int> mix;
  for (int l = 0; l < real.num_layers; ++l) ++mix[kind_of(real, l)];
  return mix;
}

// Tokens a round of N drafts yields when each draft is accepted with probability a, independently
// (the accepted prefix plus the correction or bonus token): sum_{k=0..N} a^k.
double expected_tokens(int n, double a) { return (1 - std::pow(a, n + 1)) / (1 - a); }
constexpr double kAcceptance[] = {0.6, 0.7, 0.8, 0.9};

// Timings of one kind of runner call (the target's decode step or verification, or an MTP draft
// step) over the timed engine steps.
struct CallTimes {
  std::vector<double> device_ms, host_ms, wall_ms;
  int calls = 0, replayed = 0;
  int64_t tokens = -1;  // of the first call (every call of a kind is checked to have the same)
  int64_t nodes = -1;   // of a captured or replayed graph of the call
  void add(const engine::StepProfile& p, bool cuda) {
    if (cuda) device_ms.push_back(p.device_ms);
    host_ms.push_back(p.host_ms);
    wall_ms.push_back(p.wall_ms);
    ++calls;
    replayed += p.graph == engine::StepProfile::Graph::Replayed;
    if (tokens < 0) tokens = p.tokens;
    if (p.graph_nodes >= 0) nodes = p.graph_nodes;
  }
  // The time rows report: device time on CUDA, the call's wall time on the CPU (no device).
  double us(bool cuda) const { return median(cuda ? device_ms : wall_ms) * 1e3; }
};

// A target step's layer boundaries (CUDA events): per layer kind and the head.
struct LayerTimes {
  std::map<std::string, std::vector<double>> per_kind;
  std::vector<double> head_ms;
  void add(const engine::StepProfile& p, const model::ModelConfig& c) {
    DSA_CHECK(p.points_ms.size() == static_cast<size_t>(c.num_layers) + 1,
              "bench decode: the forward marked {} points, expected {}", p.points_ms.size(), c.num_layers + 1);
    for (int l = 0; l < c.num_layers; ++l) per_kind[kind_of(c, l)].push_back(p.points_ms[l + 1] - p.points_ms[l]);
    head_ms.push_back(p.device_ms - p.points_ms.back() + p.points_ms.front());
  }
};

// What stays the same over every measured shape.
struct Setup {
  const model::ModelConfig& c;
  std::vector<size_t> layer_bytes;
  std::map<std::string, int> mix;
  double copy_gbs = 0;
  bool cuda = false;
};

// Rows per layer kind of a target step of T tokens over B requests at ctx tokens of context:
// median time, the bytes it reads and their floor at the copy rate. Returns the per-kind time (us).
// The KV bytes count each request's context once (the N + 1 verified rows of a request read the
// same window and mostly the same entries: the floor is a lower bound); the routed experts, the
// ones T tokens are expected to touch.
std::map<std::string, double> layer_rows(const Setup& su, const LayerTimes& lt, const std::string& prefix, int64_t B,
                                         int64_t T, int64_t ctx, std::vector<Row>& rows) {
  const model::ModelConfig& c = su.c;
  std::map<std::string, double> kind_us;
  for (const auto& [kind, ts] : lt.per_kind) {
    double wbytes = 0, kvbytes = 0;
    int n = 0;
    for (int l = 0; l < c.num_layers; ++l)
      if (kind_of(c, l) == kind) {
        // What the step reads: the layer's weights, with only the routed experts it touches.
        double b = static_cast<double>(su.layer_bytes[static_cast<size_t>(l)]);
        if (has_routed_experts(c, l)) b -= (c.n_routed_experts - touched_experts(c, T)) * expert_bytes(c);
        wbytes += b;
        kvbytes += kv_read_bytes(c, l, ctx) * static_cast<double>(B);
        ++n;
      }
    wbytes /= n;
    kvbytes /= n;
    const double us = median(ts) * 1e3, bytes = wbytes + kvbytes;
    const double floor_us = bytes / (su.copy_gbs * 1e9) * 1e6;  // at the copy rate (read + write bytes per s)
    kind_us[kind] = us;
    Row r;
    r.name = fmt::format("{} {} layer", prefix, kind);
    r.us = us;
    r.gbs = bytes / (us * 1e-6) / 1e9;
    r.roofline_pct = floor_us / us * 100;
    r.extra["weight_MB"] = wbytes / 1e6;
    r.extra["kv_MB"] = kvbytes / 1e6;
    r.extra["floor_us"] = floor_us;
    r.extra["x_floor"] = us / floor_us;
    rows.push_back(r);
  }
  return kind_us;
}

// The real model's target step: its layer mix at the measured per-kind times, plus the head.
// `complete` is false when a kind of the mix was not measured.
double full_model_us(const Setup& su, const std::map<std::string, double>& kind_us, double head_us, bool& complete) {
  double us = head_us;
  complete = true;
  for (const auto& [kind, n] : su.mix) {
    const auto it = kind_us.find(kind);
    if (it == kind_us.end()) complete = false;
    else us += n * it->second;
  }
  return us;
}

// The N = 0 step of a shape, which the speculative rows of the same shape compare with.
struct Reference {
  double step_us = 0, wall_us = 0, full_us = 0;  // full_us: the extrapolated full model (CUDA)
};

// A runner call's row: time, host time, wall time of the call, launches, graph replays.
Row call_row(const std::string& name, const CallTimes& t, bool cuda, bool graphs, int64_t launches) {
  Row r;
  r.name = name;
  r.us = t.us(cuda);
  r.extra["tokens"] = t.tokens;
  r.extra["host_us"] = median(t.host_ms) * 1e3;
  r.extra["wall_us"] = median(t.wall_ms) * 1e3;
  r.extra["launches"] = launches;
  if (graphs) r.extra["replayed"] = fmt::format("{}/{}", t.replayed, t.calls);
  return r;
}

// The rows of a shape measured with N > 0 drafts: the verification (per layer kind and whole),
// the draft steps, the round and, on CUDA, the full model extrapolated, with speed-ups over ref.
void speculative_rows(const Setup& su, const std::string& prefix, int n, int64_t B, int64_t ctx, bool graphs,
                      const CallTimes& verify, const LayerTimes& vlayers, const std::vector<CallTimes>& drafts,
                      const std::vector<double>& round_wall_ms, double emitted_per_round, int64_t verify_launches,
                      const std::string& capture_error, const Reference& ref, std::vector<Row>& rows) {
  const bool cuda = su.cuda;
  const std::map<std::string, double> kind_us =
      cuda ? layer_rows(su, vlayers, prefix + " verify", B, verify.tokens, ctx, rows) : std::map<std::string, double>{};
  Row v = call_row(fmt::format("{} verify step ({} layers)", prefix, su.c.num_layers), verify, cuda, graphs,
                   verify_launches);
  if (!capture_error.empty()) v.extra["capture_error"] = capture_error;
  v.extra["x_N0"] = v.us / ref.step_us;
  rows.push_back(v);
  // Draft step 1 catches the MTP cache up with the N + 1 committed positions (B x (N + 1) tokens)
  // and proposes the first draft; steps 2..N chain one token per request.
  double drafts_us = 0, drafts_host_us = 0;
  for (size_t k = 0; k < drafts.size(); ++k) {
    if (drafts[k].calls == 0) continue;
    const std::string what = k == 0 ? "draft step 1" : fmt::format("draft steps 2-{}", n);
    rows.push_back(call_row(fmt::format("{} {}", prefix, what), drafts[k], cuda, graphs, drafts[k].nodes));
    const double per_round = static_cast<double>(drafts[k].calls) / static_cast<double>(round_wall_ms.size());
    drafts_us += drafts[k].us(cuda) * per_round;
    drafts_host_us += median(drafts[k].host_ms) * 1e3 * per_round;
  }
  // The round: 1 verification + N draft steps, what one engine step costs in steady state.
  Row r;
  r.name = fmt::format("{} round (verify + {} drafts)", prefix, n);
  r.us = v.us + drafts_us;
  r.extra["host_us"] = median(verify.host_ms) * 1e3 + drafts_host_us;
  const double wall_us = median(round_wall_ms) * 1e3;
  r.extra["wall_us"] = wall_us;
  r.extra["tokens"] = emitted_per_round;  // every draft accepted: B x (N + 1)
  r.extra["x_N0"] = wall_us / ref.wall_us;
  // The engine's rate at acceptance a: E(a) tokens per request per round of this wall time,
  // against one token per request per N = 0 step.
  for (const double a : kAcceptance)
    r.extra[fmt::format("speedup_a{:.1f}", a)] = expected_tokens(n, a) * ref.wall_us / wall_us;
  rows.push_back(r);
  if (!cuda) return;
  // The real model: the verification at its layer mix, plus the N draft steps as measured (the
  // MTP layer and the head: the same in the real model).
  bool complete = true;
  const double verify_full = full_model_us(su, kind_us, median(vlayers.head_ms) * 1e3, complete);
  Row m;
  m.name = fmt::format("{} full model (extrapolated)", prefix);
  m.us = verify_full + drafts_us;
  m.extra["verify_us"] = verify_full;
  m.extra["drafts_us"] = drafts_us;
  m.extra["x_N0"] = m.us / ref.full_us;
  for (const double a : kAcceptance) {
    const double e = expected_tokens(n, a);
    m.extra[fmt::format("tok_s_a{:.1f}", a)] = static_cast<double>(B) * e / (m.us * 1e-6);
    m.extra[fmt::format("speedup_a{:.1f}", a)] = e * ref.full_us / m.us;
  }
  if (!complete) m.extra["note"] = "a layer kind of the real model was not measured";
  rows.push_back(m);
}

std::vector<Row> run(const Options& o) {
  const Device dev = o.device_name == "cpu" ? Device::cpu() : Device::cuda(o.device);
  DSA_CHECK(o.device_name == "cpu" || o.device_name == "cuda", "--on must be cpu or cuda, got '{}'", o.device_name);
  if (dev.is_cuda()) DSA_CHECK(!cuda_devices().empty(), "bench decode: no CUDA device ({})", cuda_unavailable_reason());
  std::vector<int64_t> contexts = parse_list(o.context, "--context", int64_t{1} << 21);
  const std::vector<int64_t> batches = parse_list(o.batch, "--batch", 4096);
  const int64_t bmax = *std::max_element(batches.begin(), batches.end());
  const std::vector<int> ns = draft_counts(o.speculative);
  const int nmax = ns.back();
  const bool spec = !o.speculative.empty();
  std::string dir = o.model;
  TempCheckpoint tmp;
  std::string preset = o.preset;
  model::WeightSource source;
  source.format = model::parse_load_format(o.load_format);
  if (source.format == model::LoadFormat::Auto && dir.empty()) source.format = model::LoadFormat::Dummy;
  if (source.dummy()) {
    // No checkpoint: the preset's built-in config (a tiny one written as config.json alone),
    // cut to --layers, filled on the device.
    if (dir.empty()) {
      if (preset.empty()) preset = "flash";
      const bool glm = preset == "glm-5.1" || preset == "tiny-glm";
      if (preset == "tiny-v4" || preset == "tiny-glm") {
        tmp.dir = std::filesystem::temp_directory_path() / fmt::format("dsa_bench_decode_{}_{}", preset, ::getpid());
        std::filesystem::create_directories(tmp.dir);
        const nlohmann::json cfg = glm ? glm5_config_json(tiny_glm5_dims(), 4)
                                       : deepseek_v4_config_json(tiny_deepseek_v4_dims(), 4, 128);
        std::ofstream((tmp.dir / "config.json").string()) << cfg.dump(2) << "\n";
        dir = tmp.dir.string();
      } else {
        DSA_CHECK(preset == "flash" || preset == "pro" || preset == "glm-5.1",
                  "bench decode: unknown --preset '{}' (flash, pro, glm-5.1, tiny-v4, tiny-glm)", preset);
        dir = preset == "glm-5.1" ? "glm-5.1" : "deepseek-v4-" + preset;
        source.layers = static_cast<int>(o.layers > 0 ? o.layers : (glm ? 5 : 4));
      }
    }
    if (o.layers > 0) source.layers = static_cast<int>(o.layers);
    std::printf("dummy weights of %s%s (no checkpoint written; outputs are meaningless)\n", dir.c_str(),
                source.layers > 0 ? fmt::format(", first {} layers", source.layers).c_str() : "");
  } else if (dir.empty()) {
    if (preset.empty()) preset = "flash";
    TinyOptions t;
    t.fast_fill = preset != "tiny-v4" && preset != "tiny-glm";
    t.arch = preset == "glm-5.1" || preset == "tiny-glm" ? "glm_moe_dsa" : "deepseek_v4";
    t.preset = preset == "tiny-v4" || preset == "tiny-glm" ? "tiny" : preset;
    t.layers = o.layers > 0 ? o.layers : (t.preset == "tiny" ? 0 : (t.arch == "glm_moe_dsa" ? 5 : 4));
    t.seed = 1;
    t.max_shard_bytes = uint64_t{2} << 30;
    tmp.dir = scratch_root() / fmt::format("dsa_bench_decode_{}_{}", preset, ::getpid());
    std::filesystem::remove_all(tmp.dir);
    std::printf("writing a %s checkpoint with %lld layers to %s\n", preset.c_str(), static_cast<long long>(t.layers),
                tmp.dir.c_str());
    make_tiny_checkpoint(t, tmp.dir.string());
    dir = tmp.dir.string();
  }
  if (spec) {
    // Before any weight loads: the drafts need the checkpoint's MTP layer.
    const model::ModelConfig cfg = model::model_config_for_load(dir, source.format, source.layers);
    DSA_CHECK(cfg.num_mtp_layers > 0,
              "bench decode: --speculative-tokens {} needs an MTP layer, but {} has none (num_nextn_predict_layers = "
              "{})",
              o.speculative, dir, cfg.num_mtp_layers);
  }
  const auto load_start = std::chrono::steady_clock::now();
  cli::LoadedModel loaded =
      cli::load_model(dir, dev, o.tensor_parallel, {.progress = false, .expert_parallel = o.expert_parallel, .mtp = nmax > 0, .weights = source}, nmax);
  std::printf("model loaded in %.1f s\n",
              std::chrono::duration<double>(std::chrono::steady_clock::now() - load_start).count());
  model::CausalLM* lm = &loaded.lm();
  // A real-shape checkpoint is tens of GB: delete it as soon as it is loaded (the model holds
  // its own copy or the mapping; an unlinked file stays mapped), so that a benchmark stopped by
  // a signal or a timeout leaves nothing behind.
  if (!tmp.dir.empty()) std::filesystem::remove_all(tmp.dir);
  const model::ModelConfig& c = lm->config();
  const bool tp = loaded.tp_size() > 1;
  DSA_CHECK(!tp || o.graphs != "on",
            "bench decode: --graphs on with --tensor-parallel-size {}: tensor-parallel steps run eagerly (the "
            "in-process group stages its all-reduces through host memory, which a CUDA graph cannot capture)",
            loaded.tp_size());
  const int warm = 2, timed = o.quick ? 3 : 8;
#ifdef DSA_WITH_CUDA
  const double copy_gbs = dev.is_cuda() ? measured_copy_gbs() : 0;
#else
  const double copy_gbs = 0;
#endif
  if (copy_gbs > 0) std::printf("measured copy bandwidth %.0f GB/s (read + write)\n", copy_gbs);
  // Every engine step emits up to N + 1 tokens per request: room for all of them, so that no
  // draft is cut by max_tokens or the context until the shape is done.
  // The prompts' chunked prefill takes several steps, and a request decodes in every step after
  // its own prompt is done (while later prompts still prefill): those steps count against its
  // max_tokens too, or the first requests finish during the timed steps (B = 32 at 4K: 16
  // requests left after the third timed step, seen on the H200 2026-12-03).
  const int64_t cmax_asked = *std::max_element(contexts.begin(), contexts.end());
  const int64_t chunk = std::max<int64_t>(bmax * (nmax + 1), std::min<int64_t>(bmax * cmax_asked, 8192));
  const int64_t prefill_steps = (bmax * cmax_asked + chunk - 1) / chunk + 1;
  const int64_t per_step = nmax + 1, steps = warm + 6 + timed + 4 + prefill_steps;  // 6: the graph warm-up below
  // A context at the model's limit (--context 1M on a 1048576-position model) leaves room for
  // the decode steps: the prompt is cut by what they add.
  const int64_t room = (steps + 4) * per_step;
  for (int64_t& ctx : contexts)
    if (c.max_position_embeddings > room && ctx + room > c.max_position_embeddings) {
      const int64_t cut = c.max_position_embeddings - room;
      std::printf("context %lld: %lld prompt tokens (the model holds %lld positions; the decode steps need %lld)\n",
                  static_cast<long long>(ctx), static_cast<long long>(cut),
                  static_cast<long long>(c.max_position_embeddings), static_cast<long long>(room));
      ctx = cut;
    }
  const int64_t cmax = *std::max_element(contexts.begin(), contexts.end());
  engine::EngineOptions eo;
  eo.max_running = static_cast<int>(bmax);
  eo.max_step_tokens = std::max<int64_t>(bmax * per_step, std::min<int64_t>(bmax * cmax, 8192));  // <= chunk
  eo.max_model_len = cmax + room;
  // N > 0: one engine with N = max of the list; each request asks for its own N (N = 0 requests
  // decode without drafts in it). Every draft is accepted (benchmark mode, engine.h), so each
  // step is a full round.
  eo.speculative_tokens = nmax;
  eo.benchmark_accept_all_drafts = nmax > 0;
  const std::unique_ptr<engine::Engine> owned_engine = loaded.engine(eo);
  engine::Engine& eng = *owned_engine;
  eng.runner().set_profiling(true);
  const Setup su{c, lm->layer_weight_bytes(), real_layer_mix(c, preset), copy_gbs, dev.is_cuda()};
  std::mt19937_64 gen(7);
  std::vector<Row> rows;

  // Graph modes measured: CUDA graphs replayed (the default engine) and/or every step eager.
  std::vector<bool> modes;
  if (o.graphs != "off" && dev.is_cuda() && !tp) modes.push_back(true);
  if (o.graphs != "on" || !dev.is_cuda()) modes.push_back(false);
  struct Shape {
    int64_t ctx, B;
    bool graphs;
    int n;
  };
  std::vector<Shape> shapes;  // N innermost and ascending: N = 0 runs first, the reference of the others
  for (const int64_t ctx : contexts)
    for (const int64_t B : batches)
      for (const bool g : modes)
        for (const int n : ns) shapes.push_back({ctx, B, g, n});
  // Warm-up: one request of one prefill chunk and a few decode steps, eager, before anything is
  // timed, so that the first shape's prefill does not pay for lazy kernel loading, cuBLASLt
  // heuristics and the first growth of the workspaces (the first 4K prefill of a process ran at
  // half the rate of a later one). Its requests are discarded.
  {
    eng.runner().set_graphs(false, std::max<int64_t>(bmax * per_step, 512));
    engine::SamplingParams sp;
    sp.max_tokens = 4;
    sp.ignore_eos = true;
    std::vector<int32_t> p(static_cast<size_t>(std::min<int64_t>(cmax, eo.max_step_tokens)));
    for (int32_t& t : p) t = static_cast<int32_t>(gen() % static_cast<uint64_t>(c.vocab_size));
    eng.add_request(p, sp);
    while (eng.has_unfinished())
      for (const engine::StepOutput& s : eng.step())
        DSA_CHECK(s.finish != engine::FinishReason::Error, "bench decode: warm-up: {}", s.error);
  }
  Reference ref;
  for (const Shape& shape : shapes) {
    const int64_t ctx = shape.ctx, B = shape.B;
    const int n = shape.n;
    eng.runner().set_graphs(shape.graphs, std::max<int64_t>(bmax * per_step, 512));
    // Row names carry the context when several are measured, the mode when both are, N with
    // --speculative-tokens.
    std::string tag = contexts.size() > 1 ? fmt::format("ctx={} B={}", ctx, B) : fmt::format("B={}", B);
    if (modes.size() > 1) tag += shape.graphs ? " graph" : " eager";
    if (spec) tag += fmt::format(" N={}", n);
    engine::SamplingParams sp;
    sp.max_tokens = steps * per_step;
    sp.ignore_eos = true;
    sp.speculative_tokens = n;
    std::map<uint64_t, bool> decoding;
    for (int64_t i = 0; i < B; ++i) {
      std::vector<int32_t> p(static_cast<size_t>(ctx));
      for (int32_t& t : p) t = static_cast<int32_t>(gen() % static_cast<uint64_t>(c.vocab_size));
      decoding[eng.add_request(p, sp)] = false;
    }
    int64_t emitted = 0;  // tokens the step produced
    auto step = [&] {
      eng.runner().clear_profile_log();
      emitted = 0;
      for (const engine::StepOutput& s : eng.step()) {
        DSA_CHECK(s.finish != engine::FinishReason::Error, "bench decode: {}", s.error);
        if (!s.new_tokens.empty()) decoding[s.id] = true;
        emitted += static_cast<int64_t>(s.new_tokens.size());
      }
    };
    // The prompts' chunked prefill up to every request's first token (time to first token).
    const auto p0 = std::chrono::steady_clock::now();
    while (std::any_of(decoding.begin(), decoding.end(), [](const auto& kv) { return !kv.second; })) step();
    const double prefill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count();
    for (int i = 0; i < warm; ++i) step();
    // With graphs, warm up until a step replays: a batch's first decode steps grow the step arena
    // (an eager step under moved memory is not marked seen), then capture; neither is steady state.
    for (int i = 0; shape.graphs && dev.is_cuda() && i < 6; ++i) {
      const std::vector<engine::StepProfile>& log = eng.runner().profile_log();
      if (!log.empty() && log.front().graph == engine::StepProfile::Graph::Replayed) break;
      step();
    }
    int64_t nodes = -1;
    std::string capture_error;
    if (dev.is_cuda()) {
      eng.runner().count_nodes_next_step();  // the next runner call: the target step
      step();
      nodes = eng.runner().profile_log().front().graph_nodes;
      capture_error = eng.runner().profile_log().front().capture_error;
    }
    CallTimes target;
    LayerTimes layers;
    std::vector<CallTimes> drafts(2);  // draft step 1; draft steps 2..N
    std::vector<double> wall_ms;
    double emitted_sum = 0;
    const uint64_t bytes0 = tp ? eng.tensor_parallel()->collective_bytes(0) : 0;
    const engine::StepGraphStats g0 =
        eng.runner().graphs() ? eng.runner().graphs()->stats() : engine::StepGraphStats{};
    for (int i = 0; i < timed; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      step();
      wall_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      emitted_sum += static_cast<double>(emitted);
      const std::vector<engine::StepProfile>& log = eng.runner().profile_log();
      // The steady-state round: the target step over B x (N + 1) tokens, then N MTP steps.
      DSA_CHECK(!log.empty() && !log.front().draft && (n == 0 || log.front().tokens == B * (n + 1)) &&
                    log.size() == static_cast<size_t>(n) + 1,
                "bench decode: {}: a step ran {} runner calls, the first of {} tokens; expected a target step of B x "
                "(N + 1) = {} tokens and {} draft steps (were drafts cut by the KV cache or the step budget?)",
                tag, log.size(), log.empty() ? 0 : log.front().tokens, B * (n + 1), n);
      target.add(log.front(), dev.is_cuda());
      if (dev.is_cuda()) layers.add(log.front(), c);
      for (size_t k = 1; k < log.size(); ++k) {
        DSA_CHECK(log[k].draft, "bench decode: {}: runner call {} of a step is not a draft step", tag, k);
        drafts[k == 1 ? 0 : 1].add(log[k], dev.is_cuda());
      }
    }
    const uint64_t step_bytes = tp ? (eng.tensor_parallel()->collective_bytes(0) - bytes0) / timed : 0;
    for (const auto& [id, started] : decoding) eng.abort(id);
    while (eng.has_unfinished()) eng.step();

    Row pf;
    pf.name = fmt::format("{} prefill to first token", tag);
    pf.us = prefill_s * 1e6;
    pf.extra["tok_s"] = static_cast<double>(B * ctx) / prefill_s;
    pf.extra["chunk"] = eo.max_step_tokens;
    rows.push_back(pf);
    const double step_us = dev.is_cuda() ? target.us(true) : median(wall_ms) * 1e3;
    if (n > 0) {
      speculative_rows(su, tag, n, B, ctx, shape.graphs, target, layers, drafts, wall_ms,
                       emitted_sum / static_cast<double>(timed), nodes, capture_error, ref, rows);
    } else {
      const std::map<std::string, double> kind_us = layer_rows(su, layers, tag, B, B, ctx, rows);
      Row s;
      s.name = fmt::format("{} step ({} layers)", tag, c.num_layers);
      s.us = step_us;
      s.extra["host_us"] = median(target.host_ms) * 1e3;
      s.extra["wall_us"] = median(wall_ms) * 1e3;
      s.extra["launches"] = nodes;
      if (!capture_error.empty()) s.extra["capture_error"] = capture_error;
      if (shape.graphs) s.extra["replayed"] = fmt::format("{}/{}", target.replayed, timed);
      if (shape.graphs && eng.runner().graphs()) {
        // Why a timed step did not replay: captured (its key was seen once before), eager (first
        // sight) or a capture dropped (memory moved during it); the bench's timed steps should all replay.
        const engine::StepGraphStats& g1 = eng.runner().graphs()->stats();
        s.extra["graph_capt_eager_drop"] =
            fmt::format("{}/{}/{}", g1.captures - g0.captures, g1.eager - g0.eager, g1.dropped - g0.dropped);
        if (!g1.last_capture_error.empty()) s.extra["graph_error"] = g1.last_capture_error;
      }
      if (tp) {
        s.extra["tp"] = loaded.tp_size();
        s.extra["allreduce_KB"] = static_cast<double>(step_bytes) / 1024;  // rank 0's payload per step
      }
      s.extra["tok_s"] = static_cast<double>(B) / (median(wall_ms) * 1e-3);
      rows.push_back(s);
      ref = Reference{target.us(dev.is_cuda()), median(wall_ms) * 1e3, 0};
      if (dev.is_cuda()) {
        bool complete = true;
        const double head_us = median(layers.head_ms) * 1e3;
        Row m;
        m.name = fmt::format("{} full model (extrapolated)", tag);
        m.us = full_model_us(su, kind_us, head_us, complete);
        m.extra["tok_s"] = static_cast<double>(B) / (m.us * 1e-6);
        m.extra["head_us"] = head_us;
        if (!complete) m.extra["note"] = "a layer kind of the real model was not measured";
        rows.push_back(m);
        ref.full_us = m.us;
      }
    }
    // Progress as each shape ends (the table comes at the end; a run cut short keeps these).
    std::fprintf(stderr, "bench decode: %s: prefill %.2f s (%.0f tok/s), %s %.1f us\n", tag.c_str(), prefill_s,
                 static_cast<double>(B * ctx) / prefill_s, n > 0 ? "verify step" : "step", step_us);
  }
  return rows;
}

const bool registered = add_bench(
    "decode",
    "Decode steps through the engine: per layer kind device time vs its HBM floor, host time, launches, full-model tok/s",
    run, /*model_options=*/true);

}  // namespace
}  // namespace dsa::bench
