// Launch helpers of the model-op kernels, kept out of the .cu files so that nvcc never compiles
// fmt (dsa::Error messages are formatted in cuda_launch.cpp): select the tensors' device before
// a launch, turn a failed launch or an exceeded launch limit into dsa::Error.
#pragma once

namespace dsa::ops::cuda {

void set_device(int device);                     // cudaSetDevice; throws dsa::Error on failure
void check_launch(const char* kernel);           // cudaGetLastError after <<<>>>; throws on failure
[[noreturn]] void launch_error(const char* what);  // throws dsa::Error(what)

}  // namespace dsa::ops::cuda
