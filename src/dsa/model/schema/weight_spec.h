// Weight specs: the tensors a model expects in its checkpoint (name, shape, dtype), and a
// validator that compares a checkpoint against them. Errors name the tensor and what differs;
// tensors the spec does not know are reported (listed), never used.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dsa/core/tensor.h"

namespace dsa {
class Checkpoint;
}

namespace dsa::schema {

// Storage forms of a linear layer [out][in] (add_linear lists the tensors of each):
//  Bf16:        weight BF16
//  Fp8Ue8m0:    weight F8_E4M3 + `base`.scale F8_E8M0 [ceil(out/128)][ceil(in/128)] (DeepSeek-V4)
//  Fp8F32Inv:   weight F8_E4M3 + `base`.weight_scale_inv F32 [ceil(out/128)][ceil(in/128)] (GLM FP8)
//  Mxfp4:       weight I8 [out][in/2] + `base`.scale F8_E8M0 [out][in/32] (V4 routed experts)
enum class LinearKind { Bf16, Fp8Ue8m0, Fp8F32Inv, Mxfp4 };
std::string_view linear_kind_name(LinearKind k);

// What the model reads of a linear: every accepted form as stored (Any), or bf16 only (Bf16: a
// quantized form is dequantized to bf16 at load; exact for power-of-two scales).
enum class LinearUse { Any, Bf16 };

// Recorded on the `.weight` spec of a linear: the checkpoint may store any of `forms` (the
// first is the one the spec lists, `kind`); which one is decided by the scale tensor present
// (weight_forms.h).
struct LinearSpec {
  std::string base;  // name without ".weight"
  int64_t out = 0, in = 0;
  LinearKind kind = LinearKind::Bf16;
  std::vector<LinearKind> forms;
  LinearUse use = LinearUse::Any;
};

struct WeightSpec {
  std::string name;
  Shape shape;
  DType dtype = DType::BF16;      // what the official checkpoint stores (make-tiny writes this)
  std::vector<DType> also = {};   // other dtypes the model reads as they are (e.g. F32 norms)
  // Small vectors and fp32 parameters (norms, biases, sinks, mHC, position biases): any float
  // dtype (F32, BF16, F16) is accepted; one the model does not read is widened to F32 at load
  // (exact), which every such spec reads.
  bool any_float = false;
  std::optional<LinearSpec> linear = std::nullopt;  // on the `.weight` of a linear
  bool accepts(DType t) const;       // as stored in the checkpoint
  bool reads(DType t) const;         // as the model reads it (dtype or also)
};

// Quantization helpers for specs.
inline int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline constexpr int64_t kFp8Block = 128;  // FP8 weight block (rows x cols)
inline constexpr int64_t kMxfp4Block = 32; // MXFP4 block along K

// Appends `base`.weight (and its scale, per `kind`) for a [out][in] linear layer. `also`: other
// forms the checkpoint may store instead (the scale tensor present decides), `use`: what the
// model reads.
void add_linear(std::vector<WeightSpec>& specs, const std::string& base, int64_t out, int64_t in, LinearKind kind,
                std::vector<LinearKind> also = {}, LinearUse use = LinearUse::Any);

struct ValidationReport {
  std::vector<std::string> missing;     // expected, absent
  std::vector<std::string> mismatched;  // one message per tensor: "name: expected ..., got ..."
  std::vector<std::string> unknown;     // present, not expected (reported, not used)
  size_t expected = 0;
  bool ok() const { return missing.empty() && mismatched.empty(); }
  // Multi-line human summary (missing and mismatched first, up to `max_list` names per list).
  std::string summary(size_t max_list = 20) const;
  // Throws dsa::Error with summary() when !ok(); `what` names the checkpoint.
  void throw_if_invalid(const std::string& what) const;
};

ValidationReport validate(const Checkpoint& ckpt, const std::vector<WeightSpec>& specs);

// "BF16 or F32" (+ " (any of F32, BF16, F16)"): the dtypes a spec accepts, for messages.
std::string accepted_dtypes_str(const WeightSpec& s);

}  // namespace dsa::schema
