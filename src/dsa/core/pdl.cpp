// pdl::enabled() of builds without CUDA (the CUDA build's is in pdl.cu, beside its probe kernel).
#include "dsa/core/pdl.h"

#ifndef DSA_WITH_CUDA
namespace dsa::pdl {
bool enabled() { return false; }
bool prefetch_weights() { return false; }
}  // namespace dsa::pdl
#endif
