// Helpers for loader tests: temporary directories and hand-made safetensors bytes.
#pragma once
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include <gtest/gtest.h>

#include "common/testing.h"
#include "dsa/core/error.h"

using dsa::test::error_of;

namespace dsa::test {

// A fresh directory under the system temp dir, removed when the object dies.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string("dsa_loader_") + (info ? info->name() : "x") + "_" + std::to_string(::getpid());
    path_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() { std::filesystem::remove_all(path_); }
  std::string str() const { return path_.string(); }
  std::string file(const std::string& n) const { return (path_ / n).string(); }

 private:
  std::filesystem::path path_;
};

// Raw bytes: 8-byte little-endian length of `header` (or `len_override`), header, `data_bytes` zero bytes.
inline std::string safetensors_bytes(const std::string& header, size_t data_bytes, int64_t len_override = -1) {
  uint64_t n = len_override >= 0 ? static_cast<uint64_t>(len_override) : header.size();
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  s += header;
  s.append(data_bytes, '\0');
  return s;
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Runs `f`, expects dsa::Error, and returns its message ("" and a test failure otherwise).
}  // namespace dsa::test

#define EXPECT_HAS(haystack, needle) EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)
