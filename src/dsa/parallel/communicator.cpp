#include "dsa/parallel/communicator.h"

#include "dsa/core/error.h"

namespace dsa::parallel {

void check_reducible(const Tensor& t, const char* op) {
  DSA_CHECK(t.defined(), "{}: the tensor is undefined", op);
  DSA_CHECK(t.is_contiguous(), "{}: {} must be contiguous", op, t.str());
  DSA_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::BF16, "{}: {} must be f32 or bf16", op, t.str());
}

void check_all_gather(const Tensor& in, const Tensor& out, int n, int rank) {
  const char* op = "all_gather";
  DSA_CHECK(in.defined() && out.defined() && in.dim() >= 1, "{}: in and out must be defined with a dim 0", op);
  DSA_CHECK(in.is_contiguous() && out.is_contiguous(), "{}: in {} and out {} must be contiguous", op, in.str(),
            out.str());
  Shape want = in.shape();
  want[0] *= n;
  DSA_CHECK(out.dtype() == in.dtype() && out.shape() == want, "{} on rank {}: out is {}, expected {}{} for in {}", op,
            rank, out.str(), dtype_name(in.dtype()), shape_str(want), in.str());
}

}  // namespace dsa::parallel
