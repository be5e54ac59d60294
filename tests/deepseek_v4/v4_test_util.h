// Shared by the DeepSeek-V4 model tests: the tiny checkpoint of `dsa make-tiny --arch deepseek_v4
// --seed 1` written once per test process into a temp dir, the golden files, and logit
// comparison statistics.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dsa/core/tensor.h"
#include "dsa/model/deepseek_v4/model.h"
#include "dsa/model/safetensors.h"

namespace dsa::test::v4 {

// Directory of the tiny checkpoint (made on first use, removed at exit).
const std::string& tiny_checkpoint_dir();
std::unique_ptr<model::v4::DeepseekV4Model> load_tiny(Device dev = Device::cpu());
// One tiny model per device, loaded on first use and shared by the tests of this process (tests
// free the requests they add).
model::v4::DeepseekV4Model& cpu_model();
model::v4::DeepseekV4Model& cuda_model();

struct Golden {
  std::shared_ptr<SafetensorsFile> file;
  std::vector<int32_t> prompt;       // [T]
  std::vector<int64_t> prefill_top1; // [T]
  Tensor prefill_logits;             // f32 [K][V]: the last K prompt positions
  std::vector<int32_t> decode_ids;   // [N]
  Tensor decode_logits;              // f32 [N][V]: row i = logits after prompt + decode_ids[0..i)
};
Golden load_golden(const std::string& name);  // "short", "long", "short_bfloat16", ...

struct DiffStats {
  int64_t rows = 0, top1_match = 0;
  double max_abs = 0, mean_abs = 0, p99_abs = 0;
  std::string str() const;
};
// Compares rows of `got` [R][V] with `want` [R][V].
DiffStats compare_logits(const Tensor& got, const Tensor& want);
int64_t argmax_row(const Tensor& m, int64_t row);

}  // namespace dsa::test::v4
