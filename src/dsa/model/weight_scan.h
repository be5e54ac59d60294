// Non-finite values in checkpoint tensors (`dsa check-model`): NaN or Inf weights make every
// logit NaN and generation silently degenerate, so the checker looks for them. Float tensors are
// scanned (F32, BF16, F16: NaN and Inf; e4m3: its NaN codes; UE8M0 scales: 0xFF, which is NaN);
// integer and packed MXFP4 values are always finite. The scan stops at a time bound and says how
// much it covered.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "dsa/core/tensor.h"

namespace dsa {

struct NonFiniteTensor {
  std::string name;
  int64_t nan = 0, inf = 0;
  int64_t first = -1;  // flat index of the first non-finite element
};

struct WeightScanReport {
  std::vector<NonFiniteTensor> bad;
  size_t scanned = 0, total = 0;  // tensors
  uint64_t scanned_bytes = 0, total_bytes = 0;
  double seconds = 0;
  bool complete() const { return scanned == total; }
  std::string summary(size_t max_list = 20) const;  // one paragraph for the user
};

// Scans host tensors in order until `max_seconds` have passed (checked every few MiB; <= 0:
// scans nothing and reports so).
WeightScanReport scan_non_finite(const std::vector<std::pair<std::string, Tensor>>& tensors, double max_seconds);

}  // namespace dsa
