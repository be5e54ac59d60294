#include "dsa/model/weight_scan.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include <fmt/format.h>

#include "dsa/core/error.h"

namespace dsa {

namespace {

// Counts NaN / Inf among n elements from `p` by the bit patterns of each dtype.
void count(DType t, const uint8_t* p, int64_t n, int64_t base, NonFiniteTensor& r) {
  auto hit = [&](int64_t i, bool nan) {
    (nan ? r.nan : r.inf) += 1;
    if (r.first < 0) r.first = base + i;
  };
  switch (t) {
    case DType::F32:
      for (int64_t i = 0; i < n; ++i) {
        uint32_t u;
        std::memcpy(&u, p + 4 * i, 4);
        if ((u & 0x7F800000u) == 0x7F800000u) hit(i, (u & 0x007FFFFFu) != 0);
      }
      return;
    case DType::BF16:
    case DType::F16: {
      const uint16_t exp = t == DType::BF16 ? 0x7F80u : 0x7C00u;
      for (int64_t i = 0; i < n; ++i) {
        uint16_t u;
        std::memcpy(&u, p + 2 * i, 2);
        if ((u & exp) == exp) hit(i, (u & static_cast<uint16_t>(~exp & 0x7FFFu)) != 0);
      }
      return;
    }
    case DType::E4M3:  // fn: no Inf, S.1111.111 is NaN
      for (int64_t i = 0; i < n; ++i)
        if ((p[i] & 0x7F) == 0x7F) hit(i, true);
      return;
    case DType::E8M0:
      for (int64_t i = 0; i < n; ++i)
        if (p[i] == 0xFF) hit(i, true);
      return;
    default:
      return;  // integers, packed e2m1: always finite
  }
}

}  // namespace

WeightScanReport scan_non_finite(const std::vector<std::pair<std::string, Tensor>>& tensors, double max_seconds) {
  using clock = std::chrono::steady_clock;
  const auto t0 = clock::now();
  const auto deadline = t0 + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(max_seconds));
  WeightScanReport rep;
  rep.total = tensors.size();
  for (const auto& [name, t] : tensors) rep.total_bytes += t.nbytes();
  constexpr int64_t kChunkBytes = 8 << 20;  // deadline checked between chunks
  bool out_of_time = max_seconds <= 0;
  for (const auto& [name, tensor] : tensors) {
    if (out_of_time) break;
    DSA_CHECK(!tensor.device().is_cuda(), "scan_non_finite: {} is on {}; scan host tensors", name,
              tensor.device().str());
    const Tensor t = tensor.contiguous();
    const auto* p = static_cast<const uint8_t*>(t.raw());
    const int64_t es = static_cast<int64_t>(dtype_size(t.dtype()));
    const int64_t chunk = std::max<int64_t>(1, kChunkBytes / es);
    NonFiniteTensor r{name};
    for (int64_t i = 0; i < t.numel(); i += chunk) {
      if (clock::now() > deadline) {
        out_of_time = true;
        break;
      }
      count(t.dtype(), p + i * es, std::min(chunk, t.numel() - i), i, r);
    }
    if (out_of_time) break;  // this tensor counts as not scanned
    ++rep.scanned;
    rep.scanned_bytes += t.nbytes();
    if (r.nan + r.inf > 0) rep.bad.push_back(std::move(r));
  }
  rep.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return rep;
}

std::string WeightScanReport::summary(size_t max_list) const {
  std::string s = fmt::format("non-finite scan: {} of {} tensors ({:.1f} of {:.1f} MiB) in {:.2f} s", scanned, total,
                              scanned_bytes / 1048576.0, total_bytes / 1048576.0, seconds);
  s += complete() ? "\n" : " (time bound reached: the rest is not checked; raise --scan-seconds)\n";
  if (bad.empty()) return s + "no NaN or Inf values in the scanned tensors\n";
  s += fmt::format("{} tensors hold NaN or Inf values (the model would produce NaN logits):\n", bad.size());
  for (size_t i = 0; i < bad.size() && i < max_list; ++i)
    s += fmt::format("  {}: {} NaN, {} Inf (first at flat index {})\n", bad[i].name, bad[i].nan, bad[i].inf,
                     bad[i].first);
  if (bad.size() > max_list) s += fmt::format("  ... and {} more\n", bad.size() - max_list);
  return s;
}

}  // namespace dsa
