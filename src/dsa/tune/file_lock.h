// FileLock: an exclusive advisory lock (flock) on a lock file, held for the lifetime of the
// object. Processes that update the same tuning cache file serialise their read-merge-write
// through it. The lock file itself is never deleted (deleting it would let two processes lock
// two different inodes).
#pragma once
#include <filesystem>

namespace dsa::tune {

class FileLock {
 public:
  // Blocks until the lock is held. Creates the lock file when needed. Throws dsa::Error when it
  // cannot be opened or locked.
  explicit FileLock(const std::filesystem::path& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_ = -1;
};

}  // namespace dsa::tune
