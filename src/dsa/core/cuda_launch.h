// Launch helpers of every kernel family, kept out of the .cu files so that nvcc never compiles
// fmt (the dsa::Error messages are formatted in cuda_launch.cpp): select a tensor's device before
// a launch, turn a failed launch, a failed runtime call or an exceeded launch limit into
// dsa::Error. Callable from any build; without CUDA the first two say so.
#pragma once

namespace dsa::cuda_launch {

void set_device(int device);                          // cudaSetDevice; throws dsa::Error on failure
void check_launch(const char* kernel);                // cudaGetLastError after <<<>>>; throws on failure
void check_status(int cuda_error, const char* what);  // throws dsa::Error unless it is cudaSuccess
[[noreturn]] void launch_error(const char* what);     // throws dsa::Error(what)

}  // namespace dsa::cuda_launch
