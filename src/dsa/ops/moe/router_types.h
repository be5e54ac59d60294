// Router enums shared by host and device code (kept free of Tensor/fmt so .cu files can use them).
#pragma once

namespace dsa::ops {
enum class ScoreFunc { SqrtSoftplus, Sigmoid };
}  // namespace dsa::ops
