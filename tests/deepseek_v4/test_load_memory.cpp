// Loading holds every weight once on the device: the peak of device memory allocated while a
// DeepSeek-V4 checkpoint loads (the caching allocator's statistics) is at most the weights the
// model reads, plus the allocator's rounding (<= 10 % for the tiny model's many small tensors)
// and 16 MiB of transient buffers. Routed experts used to be held twice (the loaded per-expert
// tensors and their stacked copy).
#include <gtest/gtest.h>

#include "common/testing.h"
#include "dsa/core/cuda_memory.h"
#include "v4_test_util.h"

using namespace dsa;

TEST(DeepseekV4Load, CudaPeakMemoryIsTheWeightsOnce) {
  DSA_REQUIRE_CUDA();
  const std::string& dir = test::v4::tiny_checkpoint_dir();
  cuda_memory::reset_peak(0);
  const size_t before = cuda_memory::cache_stats(0).allocated_bytes;
  auto m = model::v4::load_deepseek_v4_model(dir, Device::cuda(0));
  const size_t peak = cuda_memory::cache_stats(0).peak_allocated_bytes - before;
  const size_t weights = m->weight_bytes();
  std::printf("V4 tiny load on cuda:0: weights %zu bytes, device peak during load %zu bytes (%.3fx)\n", weights, peak,
              static_cast<double>(peak) / static_cast<double>(weights));
  EXPECT_LE(peak, weights + weights / 10 + (size_t{16} << 20));
  size_t sum = 0;
  for (size_t b : m->layer_weight_bytes()) sum += b;
  EXPECT_LT(sum, weights);  // embedding, head and final norm come on top of the layers
}
