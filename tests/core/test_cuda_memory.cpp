// The caching device allocator (core/cuda_memory.h): size rounding on the CPU; on a GPU, a freed
// block is reused for the next request of the same rounded size, data written through a reused
// block is what is read back, and release_cached hands every cached block back.
#include "common/testing.h"
#include "dsa/core/cuda_memory.h"

using namespace dsa;

TEST(CudaMemory, RoundedSizes) {
  constexpr size_t MiB = 1024 * 1024;
  EXPECT_EQ(cuda_memory::rounded_size(1), 512u);
  EXPECT_EQ(cuda_memory::rounded_size(512), 512u);
  EXPECT_EQ(cuda_memory::rounded_size(513), 1024u);
  EXPECT_EQ(cuda_memory::rounded_size(MiB), MiB);
  EXPECT_EQ(cuda_memory::rounded_size(MiB + 1), 2 * MiB);
  EXPECT_EQ(cuda_memory::rounded_size(64 * MiB), 64 * MiB);
  EXPECT_EQ(cuda_memory::rounded_size(64 * MiB + 1), 80 * MiB);
  for (size_t n : {size_t{3}, size_t{4097}, 3 * MiB + 7, 100 * MiB + 1}) {
    const size_t r = cuda_memory::rounded_size(n);
    EXPECT_GE(r, n);
    EXPECT_LE(r - n, std::max<size_t>(n / 2, 511)) << n;  // bounded waste
  }
}

TEST(CudaMemory, CudaFreedBlocksAreReusedAndReleased) {
  DSA_REQUIRE_CUDA();
  cuda_memory::release_cached(0);
  const auto s0 = cuda_memory::cache_stats(0);
  void* a = cuda_memory::alloc(1000, 0);
  cuda_memory::free(a, 0);
  const auto s1 = cuda_memory::cache_stats(0);
  EXPECT_EQ(s1.cached_bytes, s0.cached_bytes + 1024);
  void* b = cuda_memory::alloc(1020, 0);  // same rounded size: the same block back
  EXPECT_EQ(a, b);
  EXPECT_EQ(cuda_memory::cache_stats(0).reuses, s1.reuses + 1);
  // Contents written through the reused block round-trip.
  std::vector<unsigned char> in(1020), out(1020, 0);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<unsigned char>(i * 7 + 3);
  cuda_memory::copy(b, in.data(), in.size(), cuda_memory::Dir::H2D);
  cuda_memory::copy(out.data(), b, out.size(), cuda_memory::Dir::D2H);
  EXPECT_EQ(in, out);
  void* c = cuda_memory::alloc(1020, 0);  // b is live: a different block
  EXPECT_NE(b, c);
  cuda_memory::free(b, 0);
  cuda_memory::free(c, 0);
  EXPECT_GE(cuda_memory::cache_stats(0).cached_bytes, 2048u);
  cuda_memory::release_cached(0);
  EXPECT_EQ(cuda_memory::cache_stats(0).cached_bytes, 0u);
  // Tensors go through the same allocator.
  {
    Tensor t = Tensor::zeros({256}, DType::F32, Device::cuda(0));
    EXPECT_GE(cuda_memory::cache_stats(0).allocated_bytes, 1024u);
  }
  EXPECT_GE(cuda_memory::cache_stats(0).cached_bytes, 1024u);
}
