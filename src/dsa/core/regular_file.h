// Opening the files users hand to dsa (config.json, tokenizer.json and its companions, the
// checkpoint index and shards, the tuning cache). Only regular files are opened: a FIFO in place
// of a file would block open(2) until a writer appears (it is opened non-blocking and refused),
// devices and sockets are refused too. Symlinks are followed; a symlink loop or any other failure
// of the path is a dsa::Error naming the path and the reason, never a std::filesystem exception.
// Whole-file reads are bounded in size, so a huge or growing file cannot exhaust memory.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace dsa {

enum class PathKind { Missing, Regular, Directory, Other };

// What `path` is after following symlinks. Missing: nothing there (ENOENT / ENOTDIR); every other
// failure (symlink loop, permission, name too long) throws naming the path.
PathKind path_kind(const std::string& path);
std::string_view path_kind_name(PathKind k);  // "missing", "a regular file", "a directory", "not a regular file"

// open(2) of a regular file for reading: returns the descriptor (the caller closes it) and
// the size. Throws "<path>: cannot open: <reason>" or "<path>: is a FIFO, not a regular file".
struct OpenedFile {
  int fd = -1;
  uint64_t size = 0;
};
OpenedFile open_regular_file(const std::string& path);

// The whole content of a regular file of at most `max_bytes` bytes (larger: an error naming
// the limit).
std::string read_regular_file(const std::string& path, uint64_t max_bytes);

// Size limits of the small JSON files dsa reads (generous: real ones are far smaller).
inline constexpr uint64_t kMaxConfigFileBytes = 16u << 20;     // config.json, *_config.json (real: < 10 KiB)
inline constexpr uint64_t kMaxIndexFileBytes = 256u << 20;     // model.safetensors.index.json (real: < 10 MiB)
inline constexpr uint64_t kMaxTokenizerFileBytes = 256u << 20; // tokenizer.json (real: 5-20 MiB)

}  // namespace dsa
