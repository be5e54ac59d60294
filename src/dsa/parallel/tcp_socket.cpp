#include "dsa/parallel/tcp_socket.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <thread>

#include "dsa/core/error.h"

namespace dsa::parallel {

namespace {

std::string err_text(int e) { return std::strerror(e); }

int ms_left(Deadline until) {
  if (until == Deadline::max()) return -1;  // no bound: poll until the peer writes or closes
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 1 << 30));
}

// Resolves host (IPv4) into addr; throws naming it.
sockaddr_in resolve(const HostPort& hp) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(hp.port));
  if (hp.host.empty() || hp.host == "0.0.0.0") {
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    return a;
  }
  if (inet_pton(AF_INET, hp.host.c_str(), &a.sin_addr) == 1) return a;
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  const int rc = getaddrinfo(hp.host.c_str(), nullptr, &hints, &res);
  DSA_CHECK(rc == 0 && res != nullptr, "cannot resolve host '{}': {}", hp.host, gai_strerror(rc));
  a.sin_addr = reinterpret_cast<sockaddr_in*>(res->ai_addr)->sin_addr;
  freeaddrinfo(res);
  return a;
}

void set_nodelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

}  // namespace

HostPort parse_host_port(const std::string& text, const char* what, bool allow_zero) {
  const size_t colon = text.rfind(':');
  DSA_CHECK(colon != std::string::npos && colon > 0 && colon + 1 < text.size(),
            "{} '{}' must be HOST:PORT (e.g. 10.0.0.1:29500)", what, text);
  HostPort hp;
  hp.host = text.substr(0, colon);
  const std::string port = text.substr(colon + 1);
  DSA_CHECK(port.size() <= 5 && port.find_first_not_of("0123456789") == std::string::npos,
            "{} '{}': port '{}' is not a number", what, text, port);
  hp.port = std::stoi(port);
  DSA_CHECK((allow_zero || hp.port >= 1) && hp.port <= 65535, "{} '{}': port {} is outside {}-65535", what, text,
            hp.port, allow_zero ? 0 : 1);
  return hp;
}

TcpStream::~TcpStream() { close(); }

TcpStream& TcpStream::operator=(TcpStream&& o) noexcept {
  if (this != &o) {
    close();
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

void TcpStream::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

void TcpStream::close_after_draining(Deadline until) {
  if (fd_ < 0) return;
  ::shutdown(fd_, SHUT_WR);
  char buf[4096];
  for (;;) {
    pollfd pf{fd_, POLLIN, 0};
    if (::poll(&pf, 1, ms_left(until)) <= 0) break;  // timed out or failed
    const ssize_t k = ::recv(fd_, buf, sizeof buf, 0);
    if (k <= 0 && !(k < 0 && errno == EINTR)) break;  // the peer closed, or an error
  }
  close();
}

TcpStream TcpStream::connect(const HostPort& to, Deadline until) {
  const sockaddr_in a = resolve(to);
  std::string last;
  for (;;) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    DSA_CHECK(fd >= 0, "socket(): {}", err_text(errno));
    if (::connect(fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0) {
      set_nodelay(fd);
      return TcpStream(fd);
    }
    last = err_text(errno);
    ::close(fd);
    if (std::chrono::steady_clock::now() >= until) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // the listener may not be up yet
  }
  fail("could not connect to {}:{} before the start-up timeout (last error: {}); is rank 0 running and the "
       "address reachable?",
       to.host, to.port, last);
}

void TcpStream::send_all(const void* data, size_t n, const std::string& what) {
  DSA_CHECK(fd_ >= 0, "{}: the connection is closed", what);
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    const ssize_t k = ::send(fd_, p, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    DSA_CHECK(k > 0, "{}: send failed: {} (the peer closed the connection: it died or stopped)", what,
              err_text(errno));
    p += k;
    n -= static_cast<size_t>(k);
  }
}

void TcpStream::recv_all(void* data, size_t n, Deadline until, const std::string& what) {
  DSA_CHECK(fd_ >= 0, "{}: the connection is closed", what);
  char* p = static_cast<char*>(data);
  const auto start = std::chrono::steady_clock::now();
  while (n > 0) {
    pollfd pf{fd_, POLLIN, 0};
    const int rc = ::poll(&pf, 1, ms_left(until));
    if (rc < 0 && errno == EINTR) continue;
    DSA_CHECK(rc >= 0, "{}: poll failed: {}", what, err_text(errno));
    if (rc == 0)
      fail("{}: timed out after {} ms", what,
           std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - start).count());
    const ssize_t k = ::recv(fd_, p, n, 0);
    if (k < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    DSA_CHECK(k != 0 && !(k < 0 && errno == ECONNRESET), "{}: the peer closed the connection (it died or stopped)",
              what);
    DSA_CHECK(k > 0, "{}: recv failed: {}", what, err_text(errno));
    p += k;
    n -= static_cast<size_t>(k);
  }
}

TcpListener::TcpListener(const HostPort& at) {
  const sockaddr_in a = resolve(at);
  fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  DSA_CHECK(fd_ >= 0, "socket(): {}", err_text(errno));
  int one = 1;
  setsockopt(fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd_, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0 || ::listen(fd_, 64) != 0) {
    const std::string e = err_text(errno);
    ::close(fd_);
    fd_ = -1;
    fail("cannot listen on {}:{}: {}", at.host, at.port, e);
  }
  sockaddr_in got{};
  socklen_t len = sizeof got;
  getsockname(fd_, reinterpret_cast<sockaddr*>(&got), &len);
  port_ = ntohs(got.sin_port);
}

TcpListener::~TcpListener() {
  if (fd_ >= 0) ::close(fd_);
}

TcpStream TcpListener::accept(Deadline until, const std::string& what) {
  for (;;) {
    pollfd pf{fd_, POLLIN, 0};
    const int rc = ::poll(&pf, 1, ms_left(until));
    if (rc < 0 && errno == EINTR) continue;
    DSA_CHECK(rc >= 0, "{}: poll failed: {}", what, err_text(errno));
    DSA_CHECK(rc > 0, "{}: timed out", what);
    const int fd = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0 && (errno == EINTR || errno == ECONNABORTED)) continue;
    DSA_CHECK(fd >= 0, "{}: accept failed: {}", what, err_text(errno));
    set_nodelay(fd);
    return TcpStream(fd);
  }
}

}  // namespace dsa::parallel
