#include "dsa/core/device.h"

#include <cstdlib>
#include <mutex>
#include <regex>

#include "dsa/core/error.h"
#include "dsa/core/version.h"

#ifdef DSA_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace dsa {

std::string Capability::str() const { return fmt::format("{}.{}", major, minor); }
std::string Capability::sm() const { return fmt::format("sm_{}", value()); }

Capability Capability::parse(const std::string& text) {
  static const std::regex dotted(R"(^\s*(\d{1,2})\.(\d)\s*$)");
  static const std::regex sm(R"(^\s*(?:sm_?)?(\d{1,2})(\d)[af]?\s*$)");
  std::smatch m;
  if (std::regex_match(text, m, dotted) || std::regex_match(text, m, sm)) {
    Capability c{std::stoi(m[1]), std::stoi(m[2])};
    DSA_CHECK(c.major >= 1, "compute capability '{}': major version must be >= 1", text);
    return c;
  }
  fail("compute capability '{}' is not of the form MAJOR.MINOR (e.g. 9.0, 12.0) or sm_XY", text);
}

namespace {
std::once_flag g_once;
std::vector<CudaDeviceInfo> g_devices;
std::string g_reason;

void discover() {
#ifdef DSA_WITH_CUDA
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    g_reason = fmt::format("CUDA runtime reports: {}", cudaGetErrorString(e));
    cudaGetLastError();
    return;
  }
  if (n == 0) g_reason = "no CUDA device found";
  for (int i = 0; i < n; ++i) {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, i) != cudaSuccess) continue;
    CudaDeviceInfo d;
    d.index = i;
    d.name = p.name;
    d.capability = {p.major, p.minor};
    d.sm_count = p.multiProcessorCount;
    d.total_memory = p.totalGlobalMem;
    d.max_smem_per_block_optin = p.sharedMemPerBlockOptin;
    d.l2_bytes = static_cast<size_t>(p.l2CacheSize);
    g_devices.push_back(d);
  }
#else
  g_reason = "this build has no CUDA support";
#endif
}
}  // namespace

const std::vector<CudaDeviceInfo>& cuda_devices() {
  std::call_once(g_once, discover);
  return g_devices;
}

std::string cuda_unavailable_reason() {
  std::call_once(g_once, discover);
  return g_devices.empty() ? g_reason : "";
}

std::optional<Capability> capability_override() {
  const char* v = std::getenv("DSA_DEVICE_CAPABILITY");
  if (!v || !*v) return std::nullopt;
  try {
    return Capability::parse(v);
  } catch (const Error& e) {
    fail("DSA_DEVICE_CAPABILITY: {}", e.what());
  }
}

std::optional<Capability> effective_capability(int index) {
  if (auto o = capability_override()) return o;
  const auto& devs = cuda_devices();
  if (index < 0 || index >= static_cast<int>(devs.size())) return std::nullopt;
  return devs[index].capability;
}

BuildInfo build_info() {
  BuildInfo b;
  b.version = kVersion;
#ifdef DSA_WITH_CUDA
  b.cuda = true;
  b.cuda_compiler_version = DSA_CUDA_COMPILER_VERSION;
  b.cuda_archs = DSA_CUDA_ARCHS_STR;
  cudaRuntimeGetVersion(&b.cuda_runtime_version);
  cudaDriverGetVersion(&b.cuda_driver_version);
#endif
  return b;
}

std::vector<std::string> build_cuda_arch_list() {
  std::vector<std::string> out;
  std::string archs = build_info().cuda_archs, cur;
  for (char ch : archs + ",") {
    if (ch == ',' || ch == ';') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else if (ch != ' ') {
      cur += ch;
    }
  }
  return out;
}

}  // namespace dsa

namespace dsa {

DeviceMemory cuda_memory_info(int index) {
#ifdef DSA_WITH_CUDA
  int prev = 0;
  cudaGetDevice(&prev);
  if (cudaSetDevice(index) != cudaSuccess) {
    cudaGetLastError();
    fail("cuda:{}: no such CUDA device ({})", index, cuda_unavailable_reason());
  }
  DeviceMemory m;
  const cudaError_t e = cudaMemGetInfo(&m.free, &m.total);
  cudaSetDevice(prev);
  if (e != cudaSuccess) {
    cudaGetLastError();
    fail("cudaMemGetInfo on cuda:{} failed: {}", index, cudaGetErrorString(e));
  }
  return m;
#else
  fail("cuda:{}: this build has no CUDA", index);
#endif
}

}  // namespace dsa
