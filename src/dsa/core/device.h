// Device discovery and compute capability. The CPU is always present; CUDA devices are listed
// when this build has CUDA and a driver answers. DSA_DEVICE_CAPABILITY=MAJOR.MINOR makes
// selection behave as on that capability (e.g. run the SM120 route on an H200).
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace dsa {

struct Capability {
  int major = 0;
  int minor = 0;
  int value() const { return major * 10 + minor; }  // 9.0 -> 90, 12.0 -> 120
  std::string str() const;                           // "12.0"
  std::string sm() const;                            // "sm_120"
  bool operator==(const Capability&) const = default;
  auto operator<=>(const Capability& o) const { return value() <=> o.value(); }
  // Parses "12.0" / "9.0" / "12.1" / "sm_120" / "120". Throws dsa::Error on anything else.
  static Capability parse(const std::string& text);
};

struct CudaDeviceInfo {
  int index = 0;
  std::string name;
  Capability capability;  // as reported by the hardware
  int sm_count = 0;
  size_t total_memory = 0;
  size_t max_smem_per_block_optin = 0;
  size_t l2_bytes = 0;
};

// All CUDA devices (empty without CUDA support, driver or GPU). Queried once, then cached.
const std::vector<CudaDeviceInfo>& cuda_devices();
std::string cuda_unavailable_reason();  // why cuda_devices() is empty ("" when it is not)

// DSA_DEVICE_CAPABILITY, parsed; nullopt when unset. Throws dsa::Error when malformed.
std::optional<Capability> capability_override();

// The capability selection should act on for CUDA device `index`: the override when set, else
// the hardware's. nullopt when there is no such device (and no override).
std::optional<Capability> effective_capability(int index = 0);

// Free and total device memory of CUDA device `index` now (cudaMemGetInfo). Throws without CUDA.
struct DeviceMemory {
  size_t free = 0, total = 0;
};
DeviceMemory cuda_memory_info(int index);

struct BuildInfo {
  std::string version;
  bool cuda = false;
  std::string cuda_compiler_version;  // nvcc version used to build
  std::string cuda_archs;             // "90a;120a"
  int cuda_runtime_version = 0;       // at run time (e.g. 13000), 0 without CUDA
  int cuda_driver_version = 0;
};
BuildInfo build_info();
// The CUDA targets this build carries kernel images for ({"90a", "120a"}); empty without CUDA.
std::vector<std::string> build_cuda_arch_list();

}  // namespace dsa
