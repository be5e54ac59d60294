// `dsa make-tiny --arch deepseek_v4|glm_moe_dsa --out DIR [--seed N] [--dtype fp8|bf16]
// [--pow2-scales]`: writes a small random checkpoint in the official format (config.json, sharded
// safetensors, index) and validates it against the weight spec of its own config.json.
// `--dtype bf16` (or `--bf16`) writes the BF16 twin of the FP8 model with the same seed: each
// FP8 weight dequantized and rounded to bf16 (exact with power-of-two scales; GLM's fp32 scales
// are powers of two only with --pow2-scales, else the twin is within 2^-8 relative per weight).
// `--preset flash|pro|glm-5.1 [--layers N] [--fast-fill]` writes the real shapes instead (for
// load-time measurements; a few layers are enough: V4-Flash is ~3.4 GiB per layer).
// `--variant transformers [--canonical]`: the storage forms transformers writes where they differ
// from the release files, or (--canonical) the same values in the release forms
// (checkpoint_tiny.h: TinyOptions::variant). `--intermediate N`: intermediate sizes (GLM: dense
// and MoE; DeepSeek-V4: the experts') whose tensor-parallel slices are multiples of 128
// (docs/parallelism.md).
// Text: a tokenizer (dsa's own small BPE, or `--tokenizer FILE` copied and the vocabulary sized
// to it), for GLM a chat template, and `--script LIST|FILE` scripted weights (tiny_text.h).
#include <chrono>
#include <cstdio>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "tiny_text.h"
#include "dsa/core/error.h"
#include "dsa/model/checkpoint_load.h"
#include "dsa/model/checkpoint_tiny.h"
#include "dsa/model/config.h"

namespace dsa::cli {
namespace {

struct Args {
  std::string arch, out;
  uint64_t seed = 0;
  bool bf16 = false;
  std::string dtype = "fp8";
  bool pow2_scales = false;
  std::string preset = "tiny";
  int64_t layers = 0;
  bool fast_fill = false;
  std::string variant;
  bool canonical = false;
  int64_t intermediate = 0;
  TinyTextOptions text;
};

void run(const Args& a) {
  TinyOptions o;
  o.arch = a.arch;
  o.seed = a.seed;
  const bool bf16 = a.bf16 || a.dtype == "bf16";
  o.fp8 = !bf16;
  o.pow2_scales = a.pow2_scales;
  o.preset = a.preset;
  o.layers = a.layers;
  o.fast_fill = a.fast_fill;
  o.variant = a.variant;
  o.variant_canonical = a.canonical;
  DSA_CHECK(!a.canonical || !a.variant.empty(), "--canonical needs --variant");
  DSA_CHECK(a.intermediate >= 0 && a.intermediate % 128 == 0 && a.intermediate <= 65536,
            "make-tiny: --intermediate {} must be a multiple of 128 in [0, 65536]", a.intermediate);
  o.intermediate = a.intermediate;
  TinyTextOptions text = a.text;
  text.arch = a.arch;
  DSA_CHECK(!text.script_mtp || !text.script.empty(), "make-tiny: --script-mtp needs --script");
  DSA_CHECK(text.write_tokenizer || (text.tokenizer.empty() && text.script.empty()),
            "make-tiny: --no-tokenizer excludes --tokenizer and --script");
  o.vocab = text.write_tokenizer ? tiny_vocab_size(text) : 0;
  o.verbose = a.preset != "tiny";
  if (a.preset != "tiny") o.max_shard_bytes = uint64_t{2} << 30;
  const auto t0 = std::chrono::steady_clock::now();
  TinyCheckpoint t = make_tiny_checkpoint(o, a.out);
  if (text.write_tokenizer) write_tiny_text_files(text, a.out, t.config["vocab_size"].get<int64_t>());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Read back through the loader every command uses (config.json reader, weight spec, stored
  // forms): memory-mapped, so nothing is copied.
  LoadOptions lo;
  lo.progress = false;
  (void)load_model_weights(a.out, model::load_model_config(a.out), lo);
  std::printf("wrote %s: %s %s, %zu tensors, %.2f MiB in %zu shards (seed %llu, %s) in %.2f s; validated\n",
              a.out.c_str(), a.arch.c_str(), a.preset.c_str(), t.tensors, static_cast<double>(t.bytes) / (1024.0 * 1024.0), t.shards,
              static_cast<unsigned long long>(a.seed), bf16 ? "bf16" : "fp8", secs);
}

const bool registered = add_command([](CLI::App& app) {
  auto* cmd = app.add_subcommand("make-tiny", "Write a small random checkpoint in the official format");
  auto a = std::make_shared<Args>();
  cmd->add_option("--arch", a->arch, "deepseek_v4 or glm_moe_dsa")
      ->required()
      ->check(CLI::IsMember({"deepseek_v4", "glm_moe_dsa"}));
  cmd->add_option("--out", a->out, "Output directory")->required();
  cmd->add_option("--seed", a->seed, "Random seed (default 0)");
  cmd->add_option("--dtype", a->dtype,
                  "fp8 (default) or bf16: the BF16 twin of the FP8 model with the same seed (its weights "
                  "dequantized to bf16; V4 routed experts stay MXFP4)")
      ->check(CLI::IsMember({"fp8", "bf16"}));
  cmd->add_flag("--bf16", a->bf16, "Same as --dtype bf16");
  cmd->add_flag("--pow2-scales", a->pow2_scales,
                "GLM: power-of-two fp32 weight_scale_inv, so that the FP8 model and its BF16 twin hold equal weights");
  cmd->add_option("--preset", a->preset, "tiny (default), or real shapes: flash, pro (deepseek_v4), glm-5.1")
      ->check(CLI::IsMember({"tiny", "flash", "pro", "glm-5.1"}));
  cmd->add_option("--layers", a->layers, "Keep only the first N layers (presets)");
  cmd->add_option("--intermediate", a->intermediate,
                  "The intermediate sizes (GLM: dense and MoE; DeepSeek-V4: the experts'), e.g. 512, so that 2 or 4 "
                  "tensor-parallel ranks hold multiples of 128 (--tensor-parallel-size)");
  cmd->add_flag("--fast-fill", a->fast_fill, "Cheap pseudo-random bytes instead of quantized random weights");
  cmd->add_option("--variant", a->variant,
                  "transformers: the storage forms of checkpoints written with transformers 5.17 (V4: no MTP layer "
                  "but compress_ratios' trailing entry, FP8 wo_a, bf16/f16/f32 small vectors; GLM: bf16 router bias, "
                  "FP8 weights_proj)")
      ->check(CLI::IsMember({"transformers"}));
  cmd->add_flag("--canonical", a->canonical,
                "With --variant: the same values in the release storage (the checkpoint the variant must match)");
  cmd->add_option("--tokenizer", a->text.tokenizer,
                  "Copy this tokenizer.json (with its tokenizer_config.json / chat_template.jinja) and size the "
                  "vocabulary to it (default: dsa's own small BPE tokenizer with the model's special tokens)");
  cmd->add_flag("!--no-tokenizer", a->text.write_tokenizer, "Write no tokenizer files");
  cmd->add_option("--script", a->text.script,
                  "JSON list of strings (inline, or a file holding it): scripted weights that make the model reply with these pieces after the "
                  "first one (e.g. [\"<think>\", \"Hi\", \"</think>\", ...]), for testing chat end to end");
  cmd->add_flag("--script-mtp", a->text.script_mtp,
                "With --script: the MTP layer predicts the script too, so speculative decoding "
                "(--speculative-tokens) accepts its drafts (acceptance and speed-up measurements)");
  cmd->callback([a] { run(*a); });
});

}  // namespace
}  // namespace dsa::cli
