// TCP sockets for the multi-process start-up and the TCP group (tcp_group.h): a listening socket,
// a connected stream with whole-message sends and receives that wait at most until a deadline,
// and "host:port" parsing. POSIX only. Writes never raise SIGPIPE (a peer that died is an error
// of the call, not the death of this process); a peer that closed, a timeout or a socket error
// throws dsa::Error saying which and where.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

namespace dsa::parallel {

using Deadline = std::chrono::steady_clock::time_point;

// "HOST:PORT" (HOST a name or an IPv4 address, PORT 1-65535; `allow_zero`: 0 too, meaning any
// free port). Throws naming the text and what is wrong with it.
struct HostPort {
  std::string host;
  int port = 0;
};
HostPort parse_host_port(const std::string& text, const char* what, bool allow_zero = false);

class TcpStream {
 public:
  TcpStream() = default;
  explicit TcpStream(int fd) : fd_(fd) {}
  ~TcpStream();
  TcpStream(TcpStream&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  TcpStream& operator=(TcpStream&& o) noexcept;
  TcpStream(const TcpStream&) = delete;
  TcpStream& operator=(const TcpStream&) = delete;

  // Connects to host:port, retrying refused or unreachable attempts until the deadline (the
  // listening side may start later). Throws with the address and the last error.
  static TcpStream connect(const HostPort& to, Deadline until);

  bool open() const { return fd_ >= 0; }
  void close();
  // Closes after a last message: stops sending, then reads and drops what the peer still sends
  // until it closes or `until` passes. A plain close() with unread input makes the kernel reset
  // the connection, and a reset can throw away the last message before the peer reads it.
  void close_after_draining(Deadline until);
  // All n bytes, or throws. `what` names the exchange in the error ("rank 2's all_reduce_sum").
  void send_all(const void* data, size_t n, const std::string& what);
  // Exactly n bytes before `until`, or throws: "... closed the connection" when the peer closed
  // it (a rank that died or stopped), "... timed out after N ms" past the deadline.
  void recv_all(void* data, size_t n, Deadline until, const std::string& what);

 private:
  int fd_ = -1;
};

class TcpListener {
 public:
  // Binds host:port (port 0: a free port, see port()) with SO_REUSEADDR and listens.
  explicit TcpListener(const HostPort& at);
  ~TcpListener();
  TcpListener(const TcpListener&) = delete;
  TcpListener& operator=(const TcpListener&) = delete;
  int port() const { return port_; }
  // The next connection, or throws once the deadline passes.
  TcpStream accept(Deadline until, const std::string& what);

 private:
  int fd_ = -1;
  int port_ = 0;
};

}  // namespace dsa::parallel
