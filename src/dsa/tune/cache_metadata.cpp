#include "dsa/tune/cache_metadata.h"

#include <cstdlib>

#include <fmt/format.h>

#include "dsa/core/device.h"
#include "dsa/core/error.h"

namespace dsa::tune {

nlohmann::json CacheMetadata::to_json() const {
  return {{"dsa_version", dsa_version},     {"cuda_runtime", cuda_runtime},
          {"cuda_driver", cuda_driver},     {"device_name", device_name},
          {"capability", capability},       {"route_capability", route_capability},
          {"sm_count", sm_count}};
}

CacheMetadata CacheMetadata::from_json(const nlohmann::json& j) {
  DSA_CHECK(j.is_object(), "metadata is not a JSON object");
  auto str = [&](const char* k) {
    DSA_CHECK(j.contains(k) && j[k].is_string(), "metadata field '{}' missing or not a string", k);
    return j[k].get<std::string>();
  };
  auto num = [&](const char* k) {
    DSA_CHECK(j.contains(k) && j[k].is_number_integer(), "metadata field '{}' missing or not an integer", k);
    return j[k].get<int>();
  };
  CacheMetadata m;
  m.dsa_version = str("dsa_version");
  m.cuda_runtime = num("cuda_runtime");
  m.cuda_driver = num("cuda_driver");
  m.device_name = str("device_name");
  m.capability = str("capability");
  m.route_capability = str("route_capability");
  m.sm_count = num("sm_count");
  return m;
}

std::string CacheMetadata::diff(const CacheMetadata& o) const {
  std::string d;
  auto add = [&](const char* name, const auto& a, const auto& b) {
    if (a == b) return;
    d += fmt::format("{}{} {} vs {}", d.empty() ? "" : ", ", name, a, b);
  };
  add("dsa_version", dsa_version, o.dsa_version);
  add("cuda_runtime", cuda_runtime, o.cuda_runtime);
  add("cuda_driver", cuda_driver, o.cuda_driver);
  add("device_name", device_name, o.device_name);
  add("capability", capability, o.capability);
  add("route_capability", route_capability, o.route_capability);
  add("sm_count", sm_count, o.sm_count);
  return d;
}

std::string slugify(const std::string& text) {
  std::string s;
  for (char c : text) {
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')) s += c;
    else if (c >= 'A' && c <= 'Z') s += static_cast<char>(c - 'A' + 'a');
    else if (!s.empty() && s.back() != '-') s += '-';
  }
  while (!s.empty() && s.back() == '-') s.pop_back();
  return s.empty() ? "unknown" : s;
}

static std::string sm_of(const std::string& cap) {
  std::string s = "sm";
  for (char c : cap)
    if (c >= '0' && c <= '9') s += c;
  return s;
}

std::string CacheMetadata::device_kind_slug() const {
  std::string s = slugify(device_name);
  if (capability.empty()) return s;  // not a GPU (the CPU self-test)
  s.append("-").append(sm_of(capability));
  if (!route_capability.empty() && route_capability != capability) s.append("-as-").append(sm_of(route_capability));
  return s;
}

std::string CacheMetadata::hash8() const {
  // FNV-1a over the canonical JSON text: stable across runs and builds.
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : to_json().dump()) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return fmt::format("{:08x}", static_cast<uint32_t>(h ^ (h >> 32)));
}

CacheMetadata current_device_metadata(int index) {
  const auto& devs = cuda_devices();
  DSA_CHECK(index >= 0 && index < static_cast<int>(devs.size()),
            "tuning: no CUDA device {} ({})", index,
            devs.empty() ? cuda_unavailable_reason() : fmt::format("{} device(s) present", devs.size()));
  const auto& d = devs[index];
  BuildInfo b = build_info();
  CacheMetadata m;
  m.dsa_version = b.version;
  m.cuda_runtime = b.cuda_runtime_version;
  m.cuda_driver = b.cuda_driver_version;
  m.device_name = d.name;
  m.capability = d.capability.str();
  auto eff = effective_capability(index);
  m.route_capability = eff ? eff->str() : m.capability;
  m.sm_count = d.sm_count;
  return m;
}

std::filesystem::path default_cache_dir() {
  auto env = [](const char* k) -> const char* {
    const char* v = std::getenv(k);
    return v && *v ? v : nullptr;
  };
  if (const char* d = env("DSA_CACHE_DIR")) return d;
  if (const char* x = env("XDG_CACHE_HOME")) return std::filesystem::path(x) / "dsa";
  if (const char* h = env("HOME")) return std::filesystem::path(h) / ".cache" / "dsa";
  return std::filesystem::path(".dsa-cache");
}

}  // namespace dsa::tune
