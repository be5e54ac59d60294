#include "dsa/core/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "dsa/core/error.h"

namespace dsa {

namespace {

const char* type_of(mode_t m) {
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISDIR(m)) return "a directory";
  return "not a regular file";
}

}  // namespace

PathKind path_kind(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT || errno == ENOTDIR) return PathKind::Missing;
    fail("{}: cannot access: {}", path, std::strerror(errno));
  }
  if (S_ISREG(st.st_mode)) return PathKind::Regular;
  if (S_ISDIR(st.st_mode)) return PathKind::Directory;
  return PathKind::Other;
}

std::string_view path_kind_name(PathKind k) {
  switch (k) {
    case PathKind::Missing: return "missing";
    case PathKind::Regular: return "a regular file";
    case PathKind::Directory: return "a directory";
    case PathKind::Other: break;
  }
  return "not a regular file";
}

OpenedFile open_regular_file(const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading returns at once instead of waiting for a writer; it
  // has no effect on reads of a regular file.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  DSA_CHECK(fd >= 0, "{}: cannot open: {}", path, std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    fail("{}: cannot stat: {}", path, std::strerror(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("{}: is {}, not a regular file", path, type_of(st.st_mode));
  }
  return {fd, static_cast<uint64_t>(st.st_size)};
}

std::string read_regular_file(const std::string& path, uint64_t max_bytes) {
  const OpenedFile f = open_regular_file(path);
  if (f.size > max_bytes) {
    ::close(f.fd);
    fail("{}: {} bytes is larger than the limit of {} bytes for this file", path, f.size, max_bytes);
  }
  std::string out;
  out.reserve(static_cast<size_t>(f.size));
  char buf[65536];
  for (;;) {
    const ssize_t n = ::read(f.fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(f.fd);
      fail("{}: read failed: {}", path, std::strerror(err));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > max_bytes) {  // grew while being read
      ::close(f.fd);
      fail("{}: larger than the limit of {} bytes for this file", path, max_bytes);
    }
  }
  ::close(f.fd);
  return out;
}

}  // namespace dsa
