#include "dsa/parallel/communicator.h"

#include "dsa/core/error.h"

namespace dsa::parallel {

void check_reducible(const Tensor& t, const char* op) {
  DSA_CHECK(t.defined(), "{}: the tensor is undefined", op);
  DSA_CHECK(t.is_contiguous(), "{}: {} must be contiguous", op, t.str());
  DSA_CHECK(t.dtype() == DType::F32 || t.dtype() == DType::BF16, "{}: {} must be f32 or bf16", op, t.str());
}

}  // namespace dsa::parallel
