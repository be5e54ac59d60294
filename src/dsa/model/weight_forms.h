// Storage forms at load: checkpoints written by different tools store the same model in other
// forms (transformers' FP8 quantizer quantizes DeepSeek-V4's wo_a, which the release keeps in
// bf16; save_pretrained of a bf16 GLM model writes its fp32 router bias in bf16). The loader
// accepts every form a weight spec lists and hands the model the form it reads:
//  - a linear's form is decided by the scale tensor present (`.scale`: FP8 UE8M0, or MXFP4 for
//    packed I8/U8 weights; `.weight_scale_inv`: FP8 with f32 scales; none: bf16), whatever
//    config.json's quantization_config says;
//  - small float tensors (WeightSpec::any_float) in a dtype the model does not read are widened
//    to f32 (exact);
//  - quantized linears the model reads in bf16 only (LinearUse::Bf16) are dequantized to bf16
//    (exact for power-of-two scales: e4m3 or e2m1 times 2^k is a bf16 value).
#pragma once
#include <vector>

#include "dsa/model/checkpoint_load.h"
#include "dsa/model/schema/weight_spec.h"

namespace dsa {

// `specs` with each linear listed in the form `set` stores, where the spec accepts that form
// (otherwise left as listed, so that validation reports the difference).
std::vector<schema::WeightSpec> resolve_linear_forms(const TensorSet& set, const std::vector<schema::WeightSpec>& specs);

// After validation against `specs` (resolved): converts the tensors of `set` that the model does
// not read as stored (see above; host tensors) and returns the specs as the model sees them.
std::vector<schema::WeightSpec> convert_for_model(TensorSet& set, const std::vector<schema::WeightSpec>& specs);

}  // namespace dsa
