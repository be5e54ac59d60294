#include "v4_test_util.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <unistd.h>

#include <fmt/format.h>

#include "dsa/model/checkpoint_tiny.h"

namespace dsa::test::v4 {

namespace {

struct TinyDir {
  std::filesystem::path path;
  TinyDir() {
    path = std::filesystem::temp_directory_path() / ("dsa_v4_tiny_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
    TinyOptions o;
    o.arch = "deepseek_v4";
    o.seed = 1;
    make_tiny_checkpoint(o, path.string());
  }
  ~TinyDir() { std::filesystem::remove_all(path); }
};

}  // namespace

const std::string& tiny_checkpoint_dir() {
  static TinyDir dir;
  static const std::string s = dir.path.string();
  return s;
}

std::unique_ptr<model::v4::DeepseekV4Model> load_tiny(Device dev) {
  return model::v4::load_deepseek_v4_model(tiny_checkpoint_dir(), dev);
}

model::v4::DeepseekV4Model& cpu_model() {
  static auto m = load_tiny(Device::cpu());
  return *m;
}

model::v4::DeepseekV4Model& cuda_model() {
  static auto m = load_tiny(Device::cuda(0));
  return *m;
}

Golden load_golden(const std::string& name) {
  Golden g;
  g.file = SafetensorsFile::open(std::string(DSA_TEST_DATA_DIR) + "/golden/deepseek_v4/" + name + ".safetensors");
  const Tensor ids = g.file->tensor("prompt_ids"), top1 = g.file->tensor("prefill_top1");
  const Tensor dids = g.file->tensor("decode_ids");
  for (int64_t i = 0; i < ids.numel(); ++i) g.prompt.push_back(static_cast<int32_t>(ids.data<int64_t>()[i]));
  for (int64_t i = 0; i < top1.numel(); ++i) g.prefill_top1.push_back(top1.data<int64_t>()[i]);
  for (int64_t i = 0; i < dids.numel(); ++i) g.decode_ids.push_back(static_cast<int32_t>(dids.data<int64_t>()[i]));
  g.prefill_logits = g.file->tensor("prefill_logits");
  g.decode_logits = g.file->tensor("decode_logits");
  return g;
}

int64_t argmax_row(const Tensor& m, int64_t row) {
  const int64_t V = m.size(1);
  const float* p = m.data<float>() + row * V;
  return std::max_element(p, p + V) - p;
}

DiffStats compare_logits(const Tensor& got, const Tensor& want) {
  DiffStats s;
  s.rows = got.size(0);
  const int64_t V = got.size(1);
  std::vector<double> d;
  for (int64_t r = 0; r < s.rows; ++r) {
    s.top1_match += argmax_row(got, r) == argmax_row(want, r);
    for (int64_t v = 0; v < V; ++v) {
      const double x = got.data<float>()[r * V + v], y = want.data<float>()[r * V + v];
      d.push_back(std::isfinite(x) ? std::abs(x - y) : INFINITY);
    }
  }
  std::sort(d.begin(), d.end());
  s.max_abs = d.back();
  double sum = 0;
  for (double x : d) sum += x;
  s.mean_abs = sum / static_cast<double>(d.size());
  s.p99_abs = d[static_cast<size_t>(0.99 * static_cast<double>(d.size() - 1))];
  return s;
}

std::string DiffStats::str() const {
  return fmt::format("top-1 {}/{}, |diff| max {:.4g} p99 {:.4g} mean {:.4g}", top1_match, rows, max_abs, p99_abs,
                     mean_abs);
}

}  // namespace dsa::test::v4
