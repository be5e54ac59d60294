// The committed golden files (tests/data/golden/<arch>/{short,long}[_transformers][_bfloat16].safetensors, made
// by scripts/golden/make_golden_*.py from transformers 5.17 run in float32 and in bfloat16) belong to the checkpoint that
// `dsa make-tiny --seed 1` writes: the weights hash in their metadata must match the hash of a
// freshly made tiny checkpoint (so a generator change cannot silently invalidate them), and their
// contents must be self-consistent.
#include <algorithm>
#include <cstring>

#include "common/testing.h"
#include "dsa/model/checkpoint.h"
#include "dsa/model/checkpoint_tiny.h"
#include "loader_test_util.h"

using namespace dsa;

namespace {

uint64_t fnv1a(uint64_t h, const uint8_t* p, size_t n, size_t stride = 1) {
  for (size_t i = 0; i < n; i += stride) {
    h ^= p[i];
    h *= 0x100000001B3ull;
  }
  return h;
}

// Same definition as scripts/golden/golden_common.py weights_fnv1a64: per tensor in name order,
// "name|dtype|d0,d1|nbytes|" then every 64th data byte.
std::string weights_fnv1a64(const Checkpoint& c) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (const auto& name : c.names()) {
    const SafetensorsEntry& e = c.entry(name);
    std::string desc = name + "|" + e.dtype_name + "|";
    for (size_t i = 0; i < e.shape.size(); ++i) desc += (i ? "," : "") + std::to_string(e.shape[i]);
    desc += "|" + std::to_string(e.nbytes()) + "|";
    h = fnv1a(h, reinterpret_cast<const uint8_t*>(desc.data()), desc.size());
    Tensor t = c.get(name);
    h = fnv1a(h, static_cast<const uint8_t*>(t.raw()), t.nbytes(), 64);
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return buf;
}

// `variant`: "" (the release form) or a make-tiny --variant, whose files are <prompt>_<variant>[...].
void check_golden(const std::string& arch, bool fp8, const std::string& variant = "") {
  test::TempDir dir;
  TinyOptions o;
  o.arch = arch;
  o.seed = 1;
  o.fp8 = fp8;
  o.variant = variant;
  make_tiny_checkpoint(o, dir.str());
  const std::string hash = weights_fnv1a64(Checkpoint::open(dir.str()));
  const int64_t vocab = 512;
  const std::string v = variant.empty() ? "" : "_" + variant;
  for (const std::string name : {"short" + v, "long" + v, "short" + v + "_bfloat16", "long" + v + "_bfloat16"}) {
    SCOPED_TRACE(std::string(arch) + "/" + name);
    auto f = SafetensorsFile::open(std::string(DSA_TEST_DATA_DIR) + "/golden/" + arch + "/" + name + ".safetensors");
    EXPECT_EQ(f->metadata().at("arch"), arch);
    EXPECT_EQ(f->metadata().at("transformers"), "5.17.0");
    EXPECT_EQ(f->metadata().at("model_dtype"), std::string(name).find("bfloat16") == std::string::npos ? "float32" : "bfloat16");
    EXPECT_EQ(f->metadata().at("weights_fnv1a64"), hash)
        << "the golden file was made from another tiny checkpoint: regenerate it with scripts/golden/";
    Tensor ids = f->tensor("prompt_ids"), top1 = f->tensor("prefill_top1"), pl = f->tensor("prefill_logits");
    Tensor dids = f->tensor("decode_ids"), dl = f->tensor("decode_logits"), dlf = f->tensor("decode_logits_full");
    const int64_t T = ids.size(0), N = dids.size(0), K = pl.size(0);
    ASSERT_EQ(top1.shape(), (Shape{T}));
    ASSERT_EQ(pl.shape(), (Shape{K, vocab}));
    ASSERT_EQ(dl.shape(), (Shape{N, vocab}));
    ASSERT_EQ(dlf.shape(), (Shape{N, vocab}));
    ASSERT_GT(T, 4 * 4);  // longer than index_topk * compress ratio: the indexer must choose
    for (int64_t i = 0; i < T; ++i) ASSERT_TRUE(ids.data<int64_t>()[i] >= 0 && ids.data<int64_t>()[i] < vocab);
    auto argmax = [&](const Tensor& m, int64_t row) {
      const float* p = m.data<float>() + row * vocab;
      return static_cast<int64_t>(std::max_element(p, p + vocab) - p);
    };
    for (int64_t i = 0; i < K; ++i) EXPECT_EQ(argmax(pl, i), top1.data<int64_t>()[T - K + i]);
    for (int64_t i = 0; i < N; ++i) EXPECT_EQ(argmax(dl, i), dids.data<int64_t>()[i]);
    EXPECT_EQ(std::memcmp(dl.data<float>(), pl.data<float>() + (K - 1) * vocab, vocab * sizeof(float)), 0);
    for (int64_t i = 0; i < N * vocab; ++i) ASSERT_TRUE(std::isfinite(dl.data<float>()[i]));
  }
}

}  // namespace

TEST(GoldenFiles, DeepseekV4MatchesTinyCheckpoint) { check_golden("deepseek_v4", true); }
TEST(GoldenFiles, GlmMoeDsaMatchesTinyCheckpoint) { check_golden("glm_moe_dsa", true); }
// The *_transformers files (scripts/gpu/make_variant_goldens.sh): V4 from the FP8 variant, GLM
// from the BF16 one.
TEST(GoldenFiles, DeepseekV4TransformersVariantMatchesTinyCheckpoint) { check_golden("deepseek_v4", true, "transformers"); }
TEST(GoldenFiles, GlmMoeDsaTransformersVariantMatchesTinyCheckpoint) { check_golden("glm_moe_dsa", false, "transformers"); }
