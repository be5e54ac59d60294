#include "dsa/engine/kv_sizing.h"

#include <cmath>

#include <fmt/format.h>

#include "dsa/core/device.h"
#include "dsa/core/error.h"
#include "dsa/model/common/indexer_rows.h"

namespace dsa::engine {

void KvMemoryOptions::validate() const {
  DSA_CHECK(std::isfinite(gpu_memory_utilization) && gpu_memory_utilization > 0 && gpu_memory_utilization <= 1,
            "--gpu-memory-utilization must be in (0, 1], got {}", gpu_memory_utilization);
}

namespace {
double gib(size_t b) { return static_cast<double>(b) / static_cast<double>(size_t{1} << 30); }
}  // namespace

KvBudget kv_budget(Device dev, const KvMemoryOptions& o, int64_t max_step_tokens, int64_t hidden, int64_t vocab,
                   int sharing) {
  o.validate();
  DSA_CHECK(sharing >= 1, "kv_budget: {} ranks share {}", sharing, dev.str());
  if (o.kv_cache_bytes > 0)
    return {o.kv_cache_bytes, fmt::format("--kv-cache-memory {} bytes ({:.2f} GiB)", o.kv_cache_bytes, gib(o.kv_cache_bytes))};
  if (!dev.is_cuda())
    return {kDefaultCpuKvBytes, fmt::format("CPU default {:.2f} GiB (--kv-cache-memory sets it)", gib(kDefaultCpuKvBytes))};
  const DeviceMemory m = cuda_memory_info(dev.index);
  // Activations of one step: a few dozen hidden-sized f32 rows per token (residual streams,
  // projections, MoE rows) and the logits; 256 MiB covers workspaces (cuBLASLt, attention splits),
  // plus the indexer's score scratch (bounded whatever the context: model/common/indexer_rows.h)
  // and the top-k's candidate list of a wide selection (at most the size of that scratch).
  const size_t reserve = o.activation_reserve > 0
                             ? o.activation_reserve
                             : static_cast<size_t>(max_step_tokens) * static_cast<size_t>(hidden) * 4 * 64 +
                                   static_cast<size_t>(vocab) * 4 * 256 + (size_t{256} << 20) +
                                   2 * static_cast<size_t>(model::kIndexerScoreBudget);
  const double limit = o.gpu_memory_utilization * static_cast<double>(m.total);
  const double used = static_cast<double>(m.total - m.free);
  const double left = (limit - used - static_cast<double>(reserve) * sharing) / sharing;
  DSA_CHECK(left > 0,
            "KV cache: no device memory left on {}: --gpu-memory-utilization {} allows {:.2f} GiB, {:.2f} GiB are in use "
            "(weights and others) and {:.2f} GiB are kept for activations; raise --gpu-memory-utilization or give "
            "--kv-cache-memory",
            dev.str(), o.gpu_memory_utilization, limit / (1 << 30), used / (1 << 30), gib(reserve * static_cast<size_t>(sharing)));
  const auto bytes = static_cast<size_t>(left);
  if (sharing > 1)
    return {bytes, fmt::format("{:.2f} GiB per rank = ({} x {:.2f} GiB - {:.2f} GiB in use - {} x {:.2f} GiB activation "
                               "reserve) / {} ranks on {}", gib(bytes), o.gpu_memory_utilization, gib(m.total),
                               used / (1 << 30), sharing, gib(reserve), sharing, dev.str())};
  return {bytes, fmt::format("{:.2f} GiB = {} x {:.2f} GiB - {:.2f} GiB in use - {:.2f} GiB activation reserve", gib(bytes),
                             o.gpu_memory_utilization, gib(m.total), used / (1 << 30), gib(reserve))};
}

}  // namespace dsa::engine
