// Tensor tracing for debugging numerical divergence between devices or against a reference:
// with DSA_TRACE=1 in the environment, trace_tensor prints one line per call to stderr
// ("trace <name> <shape> sum=... abssum=... max|x|=... first=[...]"), computed on a host copy in
// double. Two runs (say --device cpu and --device cuda) can then be diffed line by line.
// Without DSA_TRACE it returns at once (no device synchronisation).
#pragma once
#include <string_view>

#include "dsa/core/tensor.h"

namespace dsa {

bool trace_enabled();  // DSA_TRACE set to a non-empty value other than "0" (read once)
void trace_tensor(std::string_view name, const Tensor& t, int first = 8);

}  // namespace dsa
