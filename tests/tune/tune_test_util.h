// Helpers for the tuning tests: a temporary cache directory removed at the end of the test,
// and fixed metadata standing in for a GPU.
#pragma once
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "dsa/core/error.h"
#include "dsa/tune/cache_metadata.h"

namespace dsa::tune::test {

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "dsa-tune-test-XXXXXX").string();
    DSA_CHECK(::mkdtemp(tmpl.data()) != nullptr, "mkdtemp failed");
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

inline CacheMetadata fake_metadata() {
  CacheMetadata m;
  m.dsa_version = "0.1.0";
  m.cuda_runtime = 13000;
  m.cuda_driver = 13000;
  m.device_name = "NVIDIA Test GPU";
  m.capability = "9.0";
  m.route_capability = "9.0";
  m.sm_count = 132;
  return m;
}

inline std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline void write_text(const std::filesystem::path& p, const std::string& s) {
  std::ofstream out(p, std::ios::binary);
  out << s;
}

}  // namespace dsa::tune::test
