// Error handling for the dsa/formats launchers, kept out of the .cu files so that they do not
// compile fmt: select the device before a launch, and turn a failed launch into dsa::Error.
#pragma once

namespace dsa::formats::cuda {

void set_device(int device);                 // cudaSetDevice, throws dsa::Error on failure
void check_launch(const char* kernel_name);  // cudaGetLastError after <<<>>>, throws dsa::Error
void check_status(int cuda_error, const char* what);  // throws dsa::Error unless cudaSuccess

}  // namespace dsa::formats::cuda
