// The fuzz targets in the normal build: every committed corpus file of each target (seeds and
// the regressions of earlier findings, tests/fuzz/corpus/<target>/) and seeded mutations of
// them must parse or be rejected cleanly (fuzz_target.h). The libFuzzer runs (scripts/fuzz.sh,
// from .ci/run) explore much further; this keeps the targets and the corpora working in every
// build, sanitizers or not.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fuzz_target.h"

int dsa_fuzz_safetensors(const uint8_t* data, size_t size);
int dsa_fuzz_config(const uint8_t* data, size_t size);
int dsa_fuzz_tokenizer(const uint8_t* data, size_t size);
int dsa_fuzz_jinja(const uint8_t* data, size_t size);
#ifdef DSA_WITH_SERVER
int dsa_fuzz_openai_request(const uint8_t* data, size_t size);
int dsa_fuzz_chat_request(const uint8_t* data, size_t size);
#endif

namespace {

using Target = int (*)(const uint8_t*, size_t);

std::vector<std::string> corpus(const std::string& target) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(DSA_TEST_DATA_DIR) / ".." / "fuzz" / "corpus" / target;
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::vector<std::string> out;
  for (const auto& f : files) {
    std::ifstream in(f, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    out.push_back(ss.str());
  }
  return out;
}

void run(const std::string& s, Target t) { t(reinterpret_cast<const uint8_t*>(s.data()), s.size()); }

// Byte flips, deletions, insertions of JSON-ish characters and truncations, a fixed seed.
void run_corpus_and_mutations(const std::string& name, Target t, int mutations_per_file) {
  const auto files = corpus(name);
  ASSERT_GE(files.size(), 3u) << "corpus of " << name << " is missing";
  std::mt19937_64 rng(12345);  // fixed: a failure must reproduce
  for (const std::string& seed : files) {
    run(seed, t);
    if (seed.size() < 2) continue;
    for (int i = 0; i < mutations_per_file; ++i) {
      std::string m = seed;
      const int edits = 1 + static_cast<int>(rng() % 6);
      for (int k = 0; k < edits && m.size() > 1; ++k) {
        const size_t pos = 1 + rng() % (m.size() - 1);
        switch (rng() % 4) {
          case 0: m[pos] = static_cast<char>(rng()); break;
          case 1: m.erase(pos, 1 + rng() % 8); break;
          case 2: m.insert(pos, std::string(1 + rng() % 4, "0-9e[]{},\":"[rng() % 11])); break;
          default: m.resize(pos); break;
        }
      }
      run(m, t);
    }
  }
}

TEST(FuzzTargets, SafetensorsCorpusAndMutations) { run_corpus_and_mutations("safetensors", dsa_fuzz_safetensors, 400); }
TEST(FuzzTargets, ConfigCorpusAndMutations) { run_corpus_and_mutations("config", dsa_fuzz_config, 400); }
TEST(FuzzTargets, TokenizerCorpusAndMutations) { run_corpus_and_mutations("tokenizer", dsa_fuzz_tokenizer, 40); }
TEST(FuzzTargets, JinjaCorpusAndMutations) { run_corpus_and_mutations("jinja", dsa_fuzz_jinja, 60); }
#ifdef DSA_WITH_SERVER
TEST(FuzzTargets, OpenaiRequestCorpusAndMutations) {
  run_corpus_and_mutations("openai_request", dsa_fuzz_openai_request, 400);
}
TEST(FuzzTargets, ChatRequestCorpusAndMutations) { run_corpus_and_mutations("chat_request", dsa_fuzz_chat_request, 200); }
#endif

}  // namespace
