// Instantiations of the portable decode kernel for the MODEL1 cache (DeepSeek-V4, d_qk 512).
#include "dsa/ops/sparse_mla/cuda/portable/decode_kernel.cuh"

namespace dsa::ops::sparse_mla_cuda {

void launch_decode_model1(const DecodeArgs& a, int heads_per_cta, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (heads_per_cta == 16)
    launch_decode<Model1Geom, true, 16>(a, s);
  else
    launch_decode<Model1Geom, true, 32>(a, s);
}

}  // namespace dsa::ops::sparse_mla_cuda
