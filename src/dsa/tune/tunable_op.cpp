#include "dsa/tune/tunable_op.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dsa/tune/bucket.h"

namespace dsa::tune {

int64_t TunableOp::bucket_dim(size_t, int64_t value) const { return next_pow2(value); }

Dims TunableOp::bucket(const Dims& dims, int64_t max_tokens) const {
  auto names = dim_names();
  DSA_CHECK(!names.empty() && names[0] == "tokens", "tunable op {}: first dynamic dim must be 'tokens'", name());
  DSA_CHECK(dims.size() == names.size(), "tunable op {}: got {} dims, the op has {} ({})", name(), dims.size(),
            names.size(), fmt::join(names, ", "));
  Dims b(dims.size());
  b[0] = token_bucket(dims[0], max_tokens);
  for (size_t i = 1; i < dims.size(); ++i) {
    DSA_CHECK(dims[i] >= 1, "tunable op {}: dim {} must be >= 1, got {}", name(), names[i], dims[i]);
    b[i] = bucket_dim(i, dims[i]);
  }
  return b;
}

std::string TunableOp::key(const Dims& bucketed) const {
  auto names = dim_names();
  DSA_CHECK(bucketed.size() == names.size(), "tunable op {}: got {} dims, the op has {}", name(), bucketed.size(),
            names.size());
  std::string k = instance_key().empty() ? "" : instance_key() + "|";
  for (size_t i = 0; i < names.size(); ++i) k += fmt::format("{}{}={}", i ? "," : "", names[i], bucketed[i]);
  return k;
}

}  // namespace dsa::tune
