#include "dsa/model/checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "dsa/core/error.h"
#include "dsa/core/log.h"
#include "dsa/core/regular_file.h"

namespace dsa {

namespace fs = std::filesystem;

namespace {

// A shard name from an index must be a plain file name in the checkpoint directory.
void check_shard_name(const std::string& index, const std::string& tensor, const std::string& file) {
  DSA_CHECK(!file.empty() && file.find('/') == std::string::npos && file.find('\\') == std::string::npos &&
                file != "." && file != ".." && file.find('\0') == std::string::npos,
            "{}: weight_map entry '{}' names file '{}', which is not a plain file name in the directory", index,
            tensor, file);
}

}  // namespace

std::vector<std::pair<std::string, std::string>> parse_checkpoint_index(std::string_view text,
                                                                         const std::string& label) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: not valid JSON: {}", label, e.what());
  }
  DSA_CHECK(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(),
            "{}: field 'weight_map' (an object tensor -> file) is missing", label);
  std::vector<std::pair<std::string, std::string>> out;
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    DSA_CHECK(it.value().is_string(), "{}: weight_map entry '{}' must be a file name string, got {}", label,
              it.key(), it.value().dump(-1, ' ', true, nlohmann::json::error_handler_t::replace).substr(0, 80));
    std::string file = it.value().get<std::string>();
    check_shard_name(label, it.key(), file);
    out.emplace_back(it.key(), std::move(file));
  }
  return out;
}

Checkpoint Checkpoint::open(const std::string& path) {
  Checkpoint c;
  fs::path p(path);
  // path_kind() follows symlinks and turns a loop or an unreadable path into an error naming it.
  const PathKind kind = path_kind(path);
  DSA_CHECK(kind != PathKind::Missing, "checkpoint path {} does not exist", path);
  auto add_file = [&](const fs::path& f) {
    c.files_.push_back(SafetensorsFile::open(f.string()));  // regular files only
    return c.files_.size() - 1;
  };
  auto add_all_entries = [&](size_t fi) {
    for (const auto& e : c.files_[fi]->entries()) {
      auto [it, inserted] = c.where_.emplace(e.name, Loc{fi, &e});
      DSA_CHECK(inserted, "tensor '{}' appears in both {} and {}", e.name, c.files_[it->second.file]->path(),
                c.files_[fi]->path());
    }
  };

  if (kind == PathKind::Regular) {
    c.dir_ = p.parent_path().string();
    add_all_entries(add_file(p));
    return c;
  }
  DSA_CHECK(kind == PathKind::Directory, "checkpoint path {} is neither a directory nor a regular file", path);
  c.dir_ = p.string();

  const fs::path index = p / "model.safetensors.index.json";
  if (path_kind(index.string()) != PathKind::Missing) {
    const auto weight_map = parse_checkpoint_index(read_regular_file(index.string(), kMaxIndexFileBytes), index.string());
    std::map<std::string, size_t> file_idx;
    for (const auto& [tensor, file] : weight_map) {
      if (!file_idx.count(file)) {
        DSA_CHECK(path_kind((p / file).string()) != PathKind::Missing,
                  "{}: tensor '{}' is mapped to file '{}', which does not exist in {}", index.string(), tensor, file,
                  path);
        file_idx[file] = add_file(p / file);
      }
      const size_t fi = file_idx[file];
      const SafetensorsEntry* e = c.files_[fi]->header().find(tensor);
      DSA_CHECK(e, "{}: tensor '{}' is mapped to file '{}', which does not contain it", index.string(), tensor, file);
      c.where_.emplace(tensor, Loc{fi, e});
    }
    // Tensors in shards but not in the index: visible, reported.
    for (size_t fi = 0; fi < c.files_.size(); ++fi)
      for (const auto& e : c.files_[fi]->entries())
        if (!c.where_.count(e.name)) {
          c.where_.emplace(e.name, Loc{fi, &e});
          c.unindexed_.push_back(e.name);
        }
    if (!c.unindexed_.empty())
      log_warn("{}: {} tensors are in shard files but not in the index (first: {})", index.string(),
               c.unindexed_.size(), c.unindexed_.front());
    return c;
  }

  if (path_kind((p / "model.safetensors").string()) != PathKind::Missing) {
    add_all_entries(add_file(p / "model.safetensors"));
    return c;
  }
  std::vector<fs::path> all;
  std::error_code ec;
  for (fs::directory_iterator it(p, ec), end; !ec && it != end; it.increment(ec))
    if (it->path().extension() == ".safetensors") all.push_back(it->path());
  DSA_CHECK(!ec, "{}: cannot list the directory: {}", path, ec.message());
  std::sort(all.begin(), all.end());
  DSA_CHECK(!all.empty(), "{}: no model.safetensors.index.json, model.safetensors or *.safetensors file", path);
  for (const auto& f : all) add_all_entries(add_file(f));  // a non-regular *.safetensors is an error naming it
  return c;
}

std::vector<std::string> Checkpoint::names() const {
  std::vector<std::string> v;
  v.reserve(where_.size());
  for (const auto& [n, _] : where_) v.push_back(n);
  return v;
}

const SafetensorsEntry& Checkpoint::entry(std::string_view name) const {
  auto it = where_.find(name);
  DSA_CHECK(it != where_.end(), "tensor '{}' is not in checkpoint {}", name, dir_);
  return *it->second.entry;
}

const SafetensorsFile& Checkpoint::file_of(std::string_view name) const {
  auto it = where_.find(name);
  DSA_CHECK(it != where_.end(), "tensor '{}' is not in checkpoint {}", name, dir_);
  return *files_[it->second.file];
}

Tensor Checkpoint::get(std::string_view name) const {
  auto it = where_.find(name);
  DSA_CHECK(it != where_.end(), "tensor '{}' is not in checkpoint {}", name, dir_);
  return files_[it->second.file]->tensor(*it->second.entry);
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t n = 0;
  for (const auto& [_, loc] : where_) n += loc.entry->nbytes();
  return n;
}

std::vector<size_t> plan_shards(const std::vector<uint64_t>& sizes, uint64_t max_shard_bytes) {
  DSA_CHECK(max_shard_bytes > 0, "plan_shards: max_shard_bytes must be > 0");
  std::vector<size_t> shard(sizes.size());
  size_t k = 0;
  uint64_t cur = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (cur > 0 && cur + sizes[i] > max_shard_bytes) {
      ++k;
      cur = 0;
    }
    shard[i] = k;
    cur += sizes[i];
  }
  return shard;
}

std::string shard_file_name(size_t k, size_t n) { return fmt::format("model-{:05d}-of-{:05d}.safetensors", k + 1, n); }

void write_checkpoint_index(const std::string& dir, const std::vector<std::pair<std::string, std::string>>& weight_map,
                            uint64_t total_size) {
  nlohmann::json wm = nlohmann::json::object();
  for (const auto& [tensor, file] : weight_map) {
    DSA_CHECK(!wm.contains(tensor), "{}: duplicate tensor name '{}' in the index", dir, tensor);
    wm[tensor] = file;
  }
  nlohmann::json idx = {{"metadata", {{"total_size", total_size}}}, {"weight_map", wm}};
  const fs::path ip = fs::path(dir) / "model.safetensors.index.json";
  std::ofstream out(ip);
  DSA_CHECK(out, "{}: cannot create", ip.string());
  out << idx.dump(2) << "\n";
  DSA_CHECK(out.good(), "{}: write failed", ip.string());
}

std::vector<std::string> write_sharded_checkpoint(const std::string& dir,
                                                  const std::vector<std::pair<std::string, Tensor>>& tensors,
                                                  uint64_t max_shard_bytes,
                                                  const std::map<std::string, std::string>& metadata) {
  fs::create_directories(dir);
  std::set<std::string> seen;
  std::vector<uint64_t> sizes;
  uint64_t total = 0;
  for (const auto& [name, t] : tensors) {
    DSA_CHECK(seen.insert(name).second, "{}: duplicate tensor name '{}'", dir, name);
    sizes.push_back(t.nbytes());
    total += t.nbytes();
  }
  const std::vector<size_t> shard = plan_shards(sizes, max_shard_bytes);
  const size_t n = shard.empty() ? 1 : shard.back() + 1;
  std::vector<std::string> names;
  std::vector<std::pair<std::string, std::string>> wm;
  for (size_t k = 0; k < n; ++k) {
    std::vector<std::pair<std::string, Tensor>> part;
    for (size_t i = 0; i < tensors.size(); ++i)
      if (shard[i] == k) {
        part.push_back(tensors[i]);
        wm.emplace_back(tensors[i].first, shard_file_name(k, n));
      }
    write_safetensors((fs::path(dir) / shard_file_name(k, n)).string(), part, metadata);
    names.push_back(shard_file_name(k, n));
  }
  write_checkpoint_index(dir, wm, total);
  return names;
}

}  // namespace dsa
