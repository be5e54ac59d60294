// Instantiations of the portable decode kernel for the fp8_ds_mla cache (GLM-5.1 / V3.2, d_qk 576).
#include "dsa/ops/sparse_mla/cuda/portable/decode_kernel.cuh"

namespace dsa::ops::sparse_mla_cuda {

void launch_decode_ds_mla(const DecodeArgs& a, int heads_per_cta, void* stream) {
  auto s = static_cast<cudaStream_t>(stream);
  if (heads_per_cta == 16)
    launch_decode<DsMlaGeom, false, 16>(a, s);
  else
    launch_decode<DsMlaGeom, false, 32>(a, s);
}

int probe_decode_kernel(void* attributes_out) {
  return static_cast<int>(cudaFuncGetAttributes(static_cast<cudaFuncAttributes*>(attributes_out),
                                                sparse_mla_decode_kernel<DsMlaGeom, false, 32>));
}

}  // namespace dsa::ops::sparse_mla_cuda
