#include "dsa/server/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "dsa/core/error.h"
#include "dsa/core/log.h"

namespace dsa::server {

using Clock = std::chrono::steady_clock;

struct HttpServer::Conn {
  int fd = -1;
  std::string buf;  // bytes received and not yet consumed (headers, body, a pipelined request)
  size_t off = 0;
  Clock::time_point deadline;
  bool in_request = false;  // bytes of the next request arrived: the header deadline runs
  int served = 0;
  std::string remote_ip, local_ip;
  int remote_port = 0, local_port = 0;

  Conn() = default;
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  ~Conn() {
    if (fd >= 0) ::close(fd);
  }
  size_t pending() const { return buf.size() - off; }
  // Drops empty lines before a request line (RFC 9112 2.2) and says whether a whole header
  // block is buffered.
  bool headers_complete() {
    while (off < buf.size() && (buf[off] == '\r' || buf[off] == '\n')) ++off;
    if (off == buf.size()) {
      buf.clear();
      off = 0;
      return false;
    }
    const std::string_view v(buf.data() + off, buf.size() - off);
    return v.find("\r\n\r\n") != std::string_view::npos || v.find("\n\n") != std::string_view::npos;
  }
};

namespace {

// Waits until fd has `events` (or an error) or the deadline passes; false on timeout.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left < 0) return false;
    pollfd p{fd, events, 0};
    const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
    if (r > 0) return true;
    if (r < 0 && errno != EINTR) return true;  // let the read/write report it
  }
}

// The peer has not closed its end and the socket has no error (data waiting counts as alive).
bool socket_alive(int fd) {
  pollfd p{fd, static_cast<short>(POLLIN | POLLRDHUP), 0};
  const int r = ::poll(&p, 1, 0);
  if (r < 0) return errno == EINTR;
  if (r == 0) return true;
  if (p.revents & (POLLERR | POLLHUP | POLLRDHUP | POLLNVAL)) return false;
  if (p.revents & POLLIN) {
    char b;
    const ssize_t k = ::recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (k == 0) return false;
    if (k < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return false;
  }
  return true;
}

void address_of(const sockaddr_storage& a, std::string& ip, int& port) {
  char s[INET6_ADDRSTRLEN] = {0};
  if (a.ss_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&a);
    ::inet_ntop(AF_INET, &v4->sin_addr, s, sizeof(s));
    port = ntohs(v4->sin_port);
  } else if (a.ss_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&a);
    ::inet_ntop(AF_INET6, &v6->sin6_addr, s, sizeof(s));
    port = ntohs(v6->sin6_port);
  }
  ip = s;
}

// A response the I/O thread writes itself before closing (best effort, never blocks).
void send_and_forget(int fd, int status, const char* reason, const std::string& message) {
  const std::string body = std::string(R"({"error":{"message":")") + message +
                           R"(","type":"invalid_request_error","param":null,"code":)" + std::to_string(status) + "}}";
  const std::string r = "HTTP/1.1 " + std::to_string(status) + " " + reason +
                        "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\n\r\n" + body;
  (void)!::send(fd, r.data(), r.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
}

// The Stream process_request reads and writes: buffered bytes first, then the socket.
class ConnStream final : public httplib::Stream {
 public:
  ConnStream(HttpServer::Conn& c, Clock::time_point read_deadline, std::chrono::milliseconds write_timeout)
      : c_(c), read_deadline_(read_deadline), write_timeout_(write_timeout) {}

  bool is_readable() const override { return c_.pending() > 0 || wait_for(c_.fd, POLLIN, read_deadline_); }
  // A slow reader is not a gone one: writes wait (write_timeout); this says whether the client
  // is still there, which is what content providers ask before producing more.
  bool is_writable() const override { return !failed_ && socket_alive(c_.fd); }

  ssize_t read(char* ptr, size_t size) override {
    if (size == 0) return 0;
    if (c_.pending() == 0) {
      c_.buf.clear();
      c_.off = 0;
      char tmp[16384];
      for (;;) {
        const ssize_t r = ::recv(c_.fd, tmp, sizeof(tmp), MSG_DONTWAIT);
        if (r > 0) {
          c_.buf.assign(tmp, static_cast<size_t>(r));
          break;
        }
        if (r == 0) return 0;
        if (errno == EINTR) continue;
        if ((errno == EAGAIN || errno == EWOULDBLOCK) && wait_for(c_.fd, POLLIN, read_deadline_)) continue;
        failed_ = true;
        return -1;
      }
    }
    const size_t k = std::min(size, c_.pending());
    std::memcpy(ptr, c_.buf.data() + c_.off, k);
    c_.off += k;
    return static_cast<ssize_t>(k);
  }

  ssize_t write(const char* ptr, size_t size) override {
    if (failed_) return -1;
    size_t done = 0;
    while (done < size) {
      const ssize_t r = ::send(c_.fd, ptr + done, size - done, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (r > 0) {
        done += static_cast<size_t>(r);
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) && wait_for(c_.fd, POLLOUT, Clock::now() + write_timeout_))
        continue;
      failed_ = true;
      return -1;
    }
    return static_cast<ssize_t>(size);
  }

  void get_remote_ip_and_port(std::string& ip, int& port) const override {
    ip = c_.remote_ip;
    port = c_.remote_port;
  }
  void get_local_ip_and_port(std::string& ip, int& port) const override {
    ip = c_.local_ip;
    port = c_.local_port;
  }
  // httplib 0.11.4 asks only to refuse descriptors that select() cannot watch; this stream
  // never uses select(), so it reports 0 (as httplib's own in-memory stream does).
  socket_t socket() const override { return 0; }

  bool failed() const { return failed_; }

 private:
  HttpServer::Conn& c_;
  Clock::time_point read_deadline_;
  std::chrono::milliseconds write_timeout_;
  bool failed_ = false;
};

struct RequestScope {
  HttpServer::Conn* conn = nullptr;
  bool close = false;
};
thread_local RequestScope* t_scope = nullptr;

std::chrono::milliseconds ms(double s) { return std::chrono::milliseconds(static_cast<int64_t>(s * 1000.0)); }

}  // namespace

void close_after_response() {
  if (t_scope) t_scope->close = true;
}

bool client_connected() { return !t_scope || !t_scope->conn || socket_alive(t_scope->conn->fd); }

void HttpOptions::validate() const {
  DSA_CHECK(header_timeout_s > 0, "http: header timeout must be > 0 s, got {}", header_timeout_s);
  DSA_CHECK(idle_timeout_s > 0, "http: idle timeout must be > 0 s, got {}", idle_timeout_s);
  DSA_CHECK(read_timeout_s > 0, "http: read timeout must be > 0 s, got {}", read_timeout_s);
  DSA_CHECK(write_timeout_s > 0, "http: write timeout must be > 0 s, got {}", write_timeout_s);
  DSA_CHECK(max_header_bytes >= 1024, "http: max header bytes must be >= 1024, got {}", max_header_bytes);
  DSA_CHECK(max_workers >= 1, "http: max workers must be >= 1, got {}", max_workers);
  DSA_CHECK(max_requests_per_connection >= 1, "http: max requests per connection must be >= 1, got {}",
            max_requests_per_connection);
}

HttpServer::HttpServer(HttpOptions options) : opt_(options) {
  opt_.validate();
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  DSA_CHECK(wake_fd_ >= 0, "http: eventfd failed: {}", std::strerror(errno));
  // What the Keep-Alive response header announces.
  set_keep_alive_timeout(static_cast<time_t>(opt_.idle_timeout_s));
  set_keep_alive_max_count(static_cast<size_t>(opt_.max_requests_per_connection));
}

HttpServer::~HttpServer() {
  stop();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

bool HttpServer::process_and_close_socket(socket_t sock) {
  ::close(sock);  // never reached: this class accepts and serves connections itself
  return false;
}

int HttpServer::bind(const std::string& host, int port) {
  DSA_CHECK(port >= 0 && port <= 65535, "server: port must be in [0, 65535], got {}", port);
  DSA_CHECK(listen_fd_ < 0, "server: bind() twice");
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  const int gai = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  DSA_CHECK(gai == 0, "server: cannot listen on {}:{}: {}", host, port, ::gai_strerror(gai));
  int err = 0;
  for (addrinfo* a = res; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      err = errno;
      continue;
    }
    const int yes = 1;  // TIME_WAIT reuse only: no SO_REUSEPORT, so a port in use stays refused
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 1024) == 0) {
      listen_fd_ = fd;
      break;
    }
    err = errno;
    ::close(fd);
  }
  ::freeaddrinfo(res);
  if (listen_fd_ < 0) {
    const std::string why = err == EADDRINUSE      ? "the address is already in use (is another server running there?)"
                            : err == EADDRNOTAVAIL ? "not an address of this machine"
                            : err == EACCES        ? "permission denied (ports below 1024 need privileges)"
                                                   : std::strerror(err);
    fail("server: cannot listen on {}:{}: {}", host, port, why);
  }
  sockaddr_storage sa{};
  socklen_t len = sizeof(sa);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len);
  std::string ip;
  int bound = port;
  address_of(sa, ip, bound);
  // httplib's content providers run while svr_sock_ is valid (its is_shutting_down test).
  svr_sock_ = listen_fd_;
  return bound;
}

void HttpServer::wake() {
  const uint64_t one = 1;
  (void)!::write(wake_fd_, &one, sizeof(one));
}

void HttpServer::stop_accepting() {
  accepting_ = false;
  wake();
}

void HttpServer::stop() {
  accepting_ = false;
  stopping_ = true;
  svr_sock_ = INVALID_SOCKET;  // httplib's chunked writers stop asking their providers
  {
    std::lock_guard lk(mu_);
    for (int fd : busy_fds_) ::shutdown(fd, SHUT_RDWR);  // unblocks reads and writes in progress
  }
  work_cv_.notify_all();
  wake();
}

void HttpServer::dispatch(std::unique_ptr<Conn> c) {
  std::lock_guard lk(mu_);
  ++in_progress_;
  busy_fds_.insert(c->fd);
  queue_.push_back(std::move(c));
  if (static_cast<int>(queue_.size()) > idle_workers_ && static_cast<int>(workers_.size()) < opt_.max_workers)
    workers_.emplace_back([this] { worker(); });
  work_cv_.notify_one();
}

void HttpServer::give_back(std::unique_ptr<Conn> c) {
  {
    std::lock_guard lk(mu_);
    busy_fds_.erase(c->fd);
    returned_.push_back(std::move(c));
  }
  wake();
}

void HttpServer::worker() {
  for (;;) {
    std::unique_ptr<Conn> c;
    {
      std::unique_lock lk(mu_);
      ++idle_workers_;
      work_cv_.wait(lk, [&] { return stopping_ || !queue_.empty(); });
      --idle_workers_;
      if (queue_.empty()) return;  // stopping
      c = std::move(queue_.front());
      queue_.pop_front();
    }
    serve_connection(std::move(c));
  }
}

void HttpServer::serve_connection(std::unique_ptr<Conn> c) {
  for (;;) {
    if (stopping_) break;
    RequestScope scope{c.get()};
    ConnStream strm(*c, Clock::now() + ms(opt_.read_timeout_s), ms(opt_.write_timeout_s));
    const bool last = !accepting_ || ++c->served >= opt_.max_requests_per_connection;
    bool closed = false, ok = false;
    t_scope = &scope;
    try {
      ok = process_request(strm, last, closed, nullptr);
    } catch (const std::exception& e) {  // a handler's or content provider's escape: drop the connection
      log_error("http: request on {}:{} failed: {}", c->remote_ip, c->remote_port, e.what());
    } catch (...) {
      log_error("http: request on {}:{} failed with an unknown exception", c->remote_ip, c->remote_port);
    }
    t_scope = nullptr;
    if (!ok || closed || last || scope.close || strm.failed() || stopping_) break;
    if (c->headers_complete()) continue;  // pipelined: the next request is here already
    c->in_request = c->pending() > 0;
    c->deadline = Clock::now() + ms(c->in_request ? opt_.header_timeout_s : opt_.idle_timeout_s);
    --in_progress_;
    give_back(std::move(c));
    return;
  }
  {
    std::lock_guard lk(mu_);
    busy_fds_.erase(c->fd);
  }
  c.reset();  // closes
  --in_progress_;
}

void HttpServer::serve() {
  try {
    io_loop();
  } catch (const std::exception& e) {
    log_error("http: the I/O loop failed: {}", e.what());
  }
  stop();
  std::vector<std::thread> ws;
  {
    std::lock_guard lk(mu_);
    ws.swap(workers_);
  }
  work_cv_.notify_all();
  for (auto& t : ws) t.join();
  std::lock_guard lk(mu_);
  queue_.clear();
  returned_.clear();
}

void HttpServer::io_loop() {
  DSA_CHECK(listen_fd_ >= 0, "server: serve() before bind()");
  std::map<int, std::unique_ptr<Conn>> conns;  // between requests: reading headers or idle
  bool listening = true;
  Clock::time_point accept_pause{};  // after EMFILE: retry accepting a little later
  std::vector<pollfd> fds;
  while (!stopping_) {
    if (!accepting_ && listening) {  // stop_accepting(): refuse new connections, drop idle ones
      ::close(listen_fd_);
      listen_fd_ = -1;
      listening = false;
      conns.clear();
    }
    {
      std::lock_guard lk(mu_);
      for (auto& r : returned_)
        if (accepting_) conns[r->fd] = std::move(r);
      returned_.clear();  // (what was not taken closes here)
    }
    const Clock::time_point now = Clock::now();
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    const bool poll_listen = listening && now >= accept_pause;
    if (poll_listen) fds.push_back({listen_fd_, POLLIN, 0});
    Clock::time_point next = now + std::chrono::seconds(1);
    for (auto& [fd, c] : conns) {
      fds.push_back({fd, POLLIN, 0});
      next = std::min(next, c->deadline);
    }
    if (listening && !poll_listen) next = std::min(next, accept_pause);
    const auto wait_ms = std::max<int64_t>(0, std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count());
    const int r = ::poll(fds.data(), fds.size(), static_cast<int>(wait_ms) + 1);
    if (r < 0 && errno != EINTR) fail("http: poll failed: {}", std::strerror(errno));
    if (fds[0].revents & POLLIN) {
      uint64_t v;
      (void)!::read(wake_fd_, &v, sizeof(v));
    }
    size_t i = 1;
    if (poll_listen) {
      if (fds[i].revents & POLLIN) {
        for (;;) {
          sockaddr_storage sa{};
          socklen_t len = sizeof(sa);
          const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&sa), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (fd < 0) {
            if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
              log_warn_once("http-accept", fmt::format("http: cannot accept connections: {}", std::strerror(errno)));
              accept_pause = Clock::now() + std::chrono::milliseconds(100);
            }
            break;  // EAGAIN: all taken
          }
          const int yes = 1;  // streamed tokens go out at once
          ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &yes, sizeof(yes));
          auto c = std::make_unique<Conn>();
          c->fd = fd;
          address_of(sa, c->remote_ip, c->remote_port);
          sockaddr_storage la{};
          socklen_t llen = sizeof(la);
          ::getsockname(fd, reinterpret_cast<sockaddr*>(&la), &llen);
          address_of(la, c->local_ip, c->local_port);
          c->deadline = Clock::now() + ms(opt_.idle_timeout_s);
          conns[fd] = std::move(c);
        }
      }
      ++i;
    }
    for (; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      auto it = conns.find(fds[i].fd);
      if (it == conns.end()) continue;
      Conn& c = *it->second;
      bool drop = false;
      for (;;) {
        char tmp[4096];
        const ssize_t k = ::recv(c.fd, tmp, sizeof(tmp), MSG_DONTWAIT);
        if (k > 0) {
          if (!c.in_request) {
            c.in_request = true;
            c.deadline = Clock::now() + ms(opt_.header_timeout_s);
          }
          c.buf.append(tmp, static_cast<size_t>(k));
          if (c.pending() > opt_.max_header_bytes) break;
          continue;
        }
        if (k < 0 && errno == EINTR) continue;
        if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
        drop = true;  // closed by the client, or an error
        break;
      }
      if (!drop && c.headers_complete()) {
        std::unique_ptr<Conn> mine = std::move(it->second);
        conns.erase(it);
        dispatch(std::move(mine));
        continue;
      }
      if (!drop && c.pending() > opt_.max_header_bytes) {
        send_and_forget(c.fd, 431, "Request Header Fields Too Large",
                        "the request headers exceed " + std::to_string(opt_.max_header_bytes) + " bytes");
        drop = true;
      }
      if (drop) conns.erase(it);
    }
    const Clock::time_point t = Clock::now();
    for (auto it = conns.begin(); it != conns.end();) {
      if (t < it->second->deadline) {
        ++it;
        continue;
      }
      if (it->second->in_request)
        send_and_forget(it->first, 408, "Request Timeout", "the request headers did not arrive in time");
      it = conns.erase(it);
    }
  }
  conns.clear();
  if (listen_fd_ >= 0) {
    ::close(listen_fd_);
    listen_fd_ = -1;
  }
}

}  // namespace dsa::server
