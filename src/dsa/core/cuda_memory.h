// Raw device memory and copies. Compiled against the CUDA runtime when dsa is built with CUDA;
// otherwise every call throws a dsa::Error saying that this build has no CUDA.
#pragma once
#include <cstddef>

namespace dsa::cuda_memory {

void* alloc(size_t nbytes, int device);
void free(void* p, int device) noexcept;
enum class Dir { H2D, D2H, D2D };
void copy(void* dst, const void* src, size_t nbytes, Dir dir);  // synchronous
void memset(void* p, int byte, size_t nbytes);                   // synchronous

}  // namespace dsa::cuda_memory
