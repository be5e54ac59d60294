// A checkpoint directory: one or more safetensors files seen as one set of named tensors.
//
// Layouts accepted:
//  - sharded: `model.safetensors.index.json` with {"weight_map": {tensor: file}}; every file the
//    index names is mapped and every tensor it lists must be in its file (errors name the index,
//    the tensor and the file). Tensors present in a shard but absent from the index are still
//    visible (listed by unindexed()).
//  - single file: `model.safetensors`;
//  - otherwise every `*.safetensors` file in the directory (sorted), as long as names are unique.
// A path to a single .safetensors file is accepted too.
#pragma once
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dsa/model/safetensors.h"

namespace dsa {

class Checkpoint {
 public:
  static Checkpoint open(const std::string& path);

  const std::string& dir() const { return dir_; }
  std::vector<std::string> names() const;  // sorted
  size_t size() const { return where_.size(); }
  bool has(std::string_view name) const { return where_.count(std::string(name)) != 0; }
  // Header entry of the tensor (throws naming the tensor and the checkpoint when absent).
  const SafetensorsEntry& entry(std::string_view name) const;
  // File holding the tensor.
  const SafetensorsFile& file_of(std::string_view name) const;
  // Borrowed host view (memory-mapped; no copy).
  Tensor get(std::string_view name) const;
  const std::vector<std::shared_ptr<SafetensorsFile>>& files() const { return files_; }
  const std::vector<std::string>& unindexed() const { return unindexed_; }
  uint64_t total_bytes() const;

 private:
  struct Loc {
    size_t file;
    const SafetensorsEntry* entry;
  };
  std::string dir_;
  std::vector<std::shared_ptr<SafetensorsFile>> files_;
  std::map<std::string, Loc, std::less<>> where_;
  std::vector<std::string> unindexed_;
};

// The weight_map of a `model.safetensors.index.json` (text; `label` names it in errors) as
// (tensor, shard file) pairs; every file must be a plain file name in the directory.
std::vector<std::pair<std::string, std::string>> parse_checkpoint_index(std::string_view text,
                                                                         const std::string& label);

// Writes tensors as a sharded checkpoint: files `model-0000k-of-0000n.safetensors` of at most
// `max_shard_bytes` each (a larger tensor gets a shard of its own) plus
// `model.safetensors.index.json` ({"metadata": {"total_size"}, "weight_map"}). Tensors keep the
// given order across shards. Returns the shard file names.
std::vector<std::string> write_sharded_checkpoint(const std::string& dir,
                                                  const std::vector<std::pair<std::string, Tensor>>& tensors,
                                                  uint64_t max_shard_bytes,
                                                  const std::map<std::string, std::string>& metadata = {
                                                      {"format", "pt"}});

// Pieces of the sharded writer, for writers that produce tensors shard by shard:
// shard index of each item (sizes in bytes, order kept, a new shard when the next item would
// pass max_shard_bytes), the file name of shard k of n, and the index file.
std::vector<size_t> plan_shards(const std::vector<uint64_t>& sizes, uint64_t max_shard_bytes);
std::string shard_file_name(size_t k, size_t n);
void write_checkpoint_index(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& weight_map,
                            uint64_t total_size);

}  // namespace dsa
