// Safetensors files: a validated, memory-mapped reader and a writer.
//
// File layout (https://github.com/huggingface/safetensors): 8-byte little-endian header length N,
// N bytes of JSON {"__metadata__": {str: str}, name: {"dtype", "shape", "data_offsets": [b, e]}},
// then the data section; offsets are relative to the data section start (8 + N).
//
// The reader maps the file read-only and checks everything before handing out a pointer: header
// length within the file and below a sane cap, JSON well formed, every entry's dtype one the
// engine loads (F8_E4M3, F8_E8M0, I8, U8, BF16, F16, F32, I64, I32), shape non-negative, byte
// range inside the data section and equal to numel * dtype size, ranges not overlapping. Every
// error names the file, the tensor, the field and the value. Tensors come back as borrowed views
// whose storage keeps the mapping alive, so a view may outlive the SafetensorsFile object.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "dsa/core/tensor.h"

namespace dsa {

struct SafetensorsEntry {
  std::string name;
  DType dtype = DType::U8;
  std::string dtype_name;  // as written in the file ("F8_E4M3", ...)
  Shape shape;
  uint64_t begin = 0;  // byte offsets in the data section
  uint64_t end = 0;
  uint64_t nbytes() const { return end - begin; }
};

struct SafetensorsHeader {
  std::vector<SafetensorsEntry> entries;  // sorted by name
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // 8 + N: file offset of the data section
  const SafetensorsEntry* find(std::string_view name) const;
};

// Largest JSON header accepted (the reference implementation uses the same cap).
inline constexpr uint64_t kSafetensorsMaxHeader = 100'000'000;

// Validates and parses the first `size` bytes of a safetensors file (the whole file: the data
// section size is size - 8 - N). `label` names the file in errors. Never reads outside [bytes, bytes+size).
SafetensorsHeader parse_safetensors(std::string_view label, const uint8_t* bytes, size_t size);

// Safetensors dtype name <-> engine dtype, limited to what checkpoints of the two models use.
// FP4X2 is stored as I8 (two e2m1 per byte, low nibble first).
bool safetensors_dtype_supported(std::string_view name);
DType safetensors_dtype(std::string_view name);  // throws for unsupported names
std::string_view safetensors_dtype_name(DType t);

class SafetensorsFile {
 public:
  // Maps and validates `path`. Throws dsa::Error naming the file on any problem.
  static std::shared_ptr<SafetensorsFile> open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const SafetensorsHeader& header() const { return header_; }
  const std::vector<SafetensorsEntry>& entries() const { return header_.entries; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }
  size_t file_size() const { return size_; }
  bool has(std::string_view name) const { return header_.find(name) != nullptr; }
  // Borrowed CPU view of the named tensor (throws naming file and tensor when absent).
  Tensor tensor(std::string_view name) const;
  Tensor tensor(const SafetensorsEntry& e) const;

 private:
  SafetensorsFile() = default;
  std::string path_;
  std::shared_ptr<const void> mapping_;  // owns the mmap; held by every tensor view
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  SafetensorsHeader header_;
};

// Writes tensors (any device, any strides: copied to host contiguous) to one safetensors file.
// Data is packed without holes, larger element sizes first, so every tensor is aligned to its
// element size (the header is padded with spaces to a multiple of 8). Names must be unique.
void write_safetensors(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace dsa
