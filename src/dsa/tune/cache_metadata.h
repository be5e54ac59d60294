// What a tuning cache file is valid for: the software stack (dsa version, CUDA runtime and
// driver) and the device kind (GPU name, compute capability, SM count, and the capability the
// kernels were selected for when DSA_DEVICE_CAPABILITY overrides it). Tactic timings measured
// under any other combination are not trusted: a file whose metadata differs is ignored.
#pragma once
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace dsa::tune {

struct CacheMetadata {
  std::string dsa_version;
  int cuda_runtime = 0;  // e.g. 13000; 0 without CUDA
  int cuda_driver = 0;
  std::string device_name;       // "NVIDIA H200"
  std::string capability;        // hardware, "9.0"
  std::string route_capability;  // capability kernels are selected for ("12.0" under override)
  int sm_count = 0;

  bool operator==(const CacheMetadata&) const = default;
  nlohmann::json to_json() const;
  // Throws dsa::Error when a field is missing or has the wrong type.
  static CacheMetadata from_json(const nlohmann::json& j);
  // "dsa_version 0.1.0 vs 0.2.0, cuda_driver 13000 vs 13010" (empty when equal).
  std::string diff(const CacheMetadata& other) const;
  // File-name stem of the device kind: "nvidia-h200-sm90" (+ "-as-sm120" under an override).
  std::string device_kind_slug() const;
  // Short stable hash of every field (hex), used in the fallback file name.
  std::string hash8() const;
};

// Metadata of CUDA device `index` in this process. Throws when there is no such device.
CacheMetadata current_device_metadata(int index = 0);

// $DSA_CACHE_DIR, else $XDG_CACHE_HOME/dsa, else $HOME/.cache/dsa (else ./.dsa-cache).
std::filesystem::path default_cache_dir();

// "NVIDIA GeForce RTX 5090" -> "nvidia-geforce-rtx-5090".
std::string slugify(const std::string& text);

}  // namespace dsa::tune
