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
// prefill is measured this way).
// --tensor-parallel-size N shards a GLM-5.1 model over N ranks (docs/parallelism.md): steps run
// eagerly, the layer times and weight bytes are rank 0's, and allreduce_KB is rank 0's all-reduce
// payload per step.
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

bool has_routed_experts(const model::ModelConfig& c, int l) {
  return c.n_routed_experts > 0 && (c.arch == model::Arch::DeepseekV4 || l >= c.first_k_dense_replace);
}

// A comma-separated list of counts in [1, hi] for `flag`; K and M suffixes multiply by 1024 and
// 1048576.
std::vector<int64_t> parse_list(const std::string& s, const char* flag, int64_t hi) {
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
    const int64_t x = numeric ? std::stoll(digits) * mult : 0;
    DSA_CHECK(numeric && x >= 1 && x <= hi, "{} '{}': '{}' is not a count in [1, {}]", flag, s, item, hi);
    v.push_back(x);
  }
  DSA_CHECK(!v.empty(), "{} is empty", flag);
  return v;
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

std::vector<Row> run(const Options& o) {
  const Device dev = o.device_name == "cpu" ? Device::cpu() : Device::cuda(o.device);
  DSA_CHECK(o.device_name == "cpu" || o.device_name == "cuda", "--on must be cpu or cuda, got '{}'", o.device_name);
  if (dev.is_cuda()) DSA_CHECK(!cuda_devices().empty(), "bench decode: no CUDA device ({})", cuda_unavailable_reason());
  const std::vector<int64_t> contexts = parse_list(o.context, "--context", int64_t{1} << 21);
  const int64_t cmax = *std::max_element(contexts.begin(), contexts.end());
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
  const auto load_start = std::chrono::steady_clock::now();
  cli::LoadedModel loaded = cli::load_model(dir, dev, o.tensor_parallel, {.progress = false, .weights = source});
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
  const std::vector<int64_t> batches = parse_list(o.batch, "--batch", 4096);
  const int64_t bmax = *std::max_element(batches.begin(), batches.end());
  const int warm = 2, timed = o.quick ? 3 : 8;
#ifdef DSA_WITH_CUDA
  const double copy_gbs = dev.is_cuda() ? measured_copy_gbs() : 0;
#else
  const double copy_gbs = 0;
#endif
  if (copy_gbs > 0) std::printf("measured copy bandwidth %.0f GB/s (read + write)\n", copy_gbs);
  engine::EngineOptions eo;
  eo.max_running = static_cast<int>(bmax);
  eo.max_step_tokens = std::max<int64_t>(bmax, std::min<int64_t>(bmax * cmax, 8192));
  eo.max_model_len = cmax + warm + timed + 8;
  const std::unique_ptr<engine::Engine> owned_engine = loaded.engine(eo);
  engine::Engine& eng = *owned_engine;
  eng.runner().set_profiling(true);
  const std::vector<size_t> layer_bytes = lm->layer_weight_bytes();
  const std::map<std::string, int> mix = real_layer_mix(c, preset);
  std::mt19937_64 gen(7);
  std::vector<Row> rows;

  // Graph modes measured: CUDA graphs replayed (the default engine) and/or every step eager.
  std::vector<bool> modes;
  if (o.graphs != "off" && dev.is_cuda() && !tp) modes.push_back(true);
  if (o.graphs != "on" || !dev.is_cuda()) modes.push_back(false);
  struct Shape {
    int64_t ctx, B;
    bool graphs;
  };
  std::vector<Shape> shapes;
  for (const int64_t ctx : contexts)
    for (const int64_t B : batches)
      for (const bool g : modes) shapes.push_back({ctx, B, g});
  for (const Shape& shape : shapes) {
    const int64_t ctx = shape.ctx, B = shape.B;
    eng.runner().set_graphs(shape.graphs, std::max<int64_t>(bmax, 512));
    // Row names carry the context when several are measured, the mode when both are.
    std::string tag = contexts.size() > 1 ? fmt::format("ctx={} B={}", ctx, B) : fmt::format("B={}", B);
    if (modes.size() > 1) tag += shape.graphs ? " graph" : " eager";
    engine::SamplingParams sp;
    sp.max_tokens = warm + timed + 4;
    sp.ignore_eos = true;
    std::map<uint64_t, bool> decoding;
    for (int64_t i = 0; i < B; ++i) {
      std::vector<int32_t> p(static_cast<size_t>(ctx));
      for (int32_t& t : p) t = static_cast<int32_t>(gen() % static_cast<uint64_t>(c.vocab_size));
      decoding[eng.add_request(p, sp)] = false;
    }
    auto step = [&] {
      for (const engine::StepOutput& s : eng.step()) {
        DSA_CHECK(s.finish != engine::FinishReason::Error, "bench decode: {}", s.error);
        if (!s.new_tokens.empty()) decoding[s.id] = true;
      }
    };
    // The prompts' chunked prefill up to every request's first token (time to first token).
    const auto p0 = std::chrono::steady_clock::now();
    while (std::any_of(decoding.begin(), decoding.end(), [](const auto& kv) { return !kv.second; })) step();
    const double prefill_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - p0).count();
    for (int i = 0; i < warm; ++i) step();
    int64_t nodes = -1;
    std::string capture_error;
    if (dev.is_cuda()) {
      eng.runner().count_nodes_next_step();
      step();
      nodes = eng.runner().profile().graph_nodes;
      capture_error = eng.runner().profile().capture_error;
    }
    std::map<std::string, std::vector<double>> per_kind;
    std::vector<double> device_ms, host_ms, wall_ms, head_ms;
    int replayed = 0;
    const uint64_t bytes0 = tp ? eng.tensor_parallel()->collective_bytes(0) : 0;
    for (int i = 0; i < timed; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      step();
      wall_ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      const engine::StepProfile& p = eng.runner().profile();
      replayed += p.graph == engine::StepProfile::Graph::Replayed;
      host_ms.push_back(p.host_ms);
      if (!dev.is_cuda()) continue;
      device_ms.push_back(p.device_ms);
      DSA_CHECK(p.points_ms.size() == static_cast<size_t>(c.num_layers) + 1,
                "bench decode: the forward marked {} points, expected {}", p.points_ms.size(), c.num_layers + 1);
      for (int l = 0; l < c.num_layers; ++l) per_kind[kind_of(c, l)].push_back(p.points_ms[l + 1] - p.points_ms[l]);
      head_ms.push_back(p.device_ms - p.points_ms.back() + p.points_ms.front());
    }
    const uint64_t step_bytes = tp ? (eng.tensor_parallel()->collective_bytes(0) - bytes0) / timed : 0;
    for (const auto& [id, started] : decoding) eng.abort(id);
    while (eng.has_unfinished()) eng.step();

    // Per layer kind: time, bytes, floor.
    std::map<std::string, double> kind_us;
    for (auto& [kind, ts] : per_kind) {
      double wbytes = 0, kvbytes = 0;
      int n = 0;
      for (int l = 0; l < c.num_layers; ++l)
        if (kind_of(c, l) == kind) {
          // What the step reads: the layer's weights, with only the routed experts it touches.
          double b = static_cast<double>(layer_bytes[static_cast<size_t>(l)]);
          if (has_routed_experts(c, l)) b -= (c.n_routed_experts - touched_experts(c, B)) * expert_bytes(c);
          wbytes += b;
          kvbytes += kv_read_bytes(c, l, ctx) * static_cast<double>(B);
          ++n;
        }
      wbytes /= n;
      kvbytes /= n;
      const double us = median(ts) * 1e3, bytes = wbytes + kvbytes;
      const double floor_us = bytes / (copy_gbs * 1e9) * 1e6;  // at the copy rate (read + write bytes per s)
      kind_us[kind] = us;
      Row r;
      r.name = fmt::format("{} {} layer", tag, kind);
      r.us = us;
      r.gbs = bytes / (us * 1e-6) / 1e9;
      r.roofline_pct = floor_us / us * 100;
      r.extra["weight_MB"] = wbytes / 1e6;
      r.extra["kv_MB"] = kvbytes / 1e6;
      r.extra["floor_us"] = floor_us;
      r.extra["x_floor"] = us / floor_us;
      rows.push_back(r);
    }
    Row pf;
    pf.name = fmt::format("{} prefill to first token", tag);
    pf.us = prefill_s * 1e6;
    pf.extra["tok_s"] = static_cast<double>(B * ctx) / prefill_s;
    pf.extra["chunk"] = eo.max_step_tokens;
    rows.push_back(pf);
    Row s;
    s.name = fmt::format("{} step ({} layers)", tag, c.num_layers);
    s.us = dev.is_cuda() ? median(device_ms) * 1e3 : median(wall_ms) * 1e3;
    s.extra["host_us"] = median(host_ms) * 1e3;
    s.extra["wall_us"] = median(wall_ms) * 1e3;
    s.extra["launches"] = nodes;
    if (!capture_error.empty()) s.extra["capture_error"] = capture_error;
    if (shape.graphs) s.extra["replayed"] = fmt::format("{}/{}", replayed, timed);
    if (tp) {
      s.extra["tp"] = loaded.tp_size();
      s.extra["allreduce_KB"] = static_cast<double>(step_bytes) / 1024;  // rank 0's payload per step
    }
    s.extra["tok_s"] = static_cast<double>(B) / (median(wall_ms) * 1e-3);
    rows.push_back(s);
    if (dev.is_cuda()) {
      // The real model: its layer mix at the measured per-kind times, plus the head.
      double us = median(head_ms) * 1e3;
      bool complete = true;
      for (const auto& [kind, n] : mix) {
        if (!kind_us.count(kind)) complete = false;
        us += n * (kind_us.count(kind) ? kind_us[kind] : 0);
      }
      Row m;
      m.name = fmt::format("{} full model (extrapolated)", tag);
      m.us = us;
      m.extra["tok_s"] = static_cast<double>(B) / (us * 1e-6);
      m.extra["head_us"] = median(head_ms) * 1e3;
      if (!complete) m.extra["note"] = "a layer kind of the real model was not measured";
      rows.push_back(m);
    }
    // Progress as each shape ends (the table comes at the end; a run cut short keeps these).
    std::fprintf(stderr, "bench decode: %s: prefill %.2f s (%.0f tok/s), step %.1f us\n", tag.c_str(), prefill_s,
                 static_cast<double>(B * ctx) / prefill_s, s.us);
  }
  return rows;
}

const bool registered = add_bench(
    "decode",
    "Decode steps through the engine: per layer kind device time vs its HBM floor, host time, launches, full-model tok/s",
    run, /*model_options=*/true);

}  // namespace
}  // namespace dsa::bench
