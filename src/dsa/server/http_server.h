// HttpServer: cpp-httplib (0.11.4) parses requests, routes them and writes responses
// (httplib::Server::process_request), but connections are ours. httplib's own listen loop holds
// one worker thread per connection from accept to close, has no deadline for the whole header
// block (a client sending a header line every few seconds keeps a worker forever; 64 of them
// starve the pool, /health included) and binds with SO_REUSEPORT (a second server on a port in
// use starts and silently shares the traffic).
//
// Here one I/O thread polls the listening socket and every connection between requests: it
// accepts, reads request headers without blocking (at most max_header_bytes, complete within
// header_timeout of the request's first byte; a new or kept-alive connection that sends nothing
// closes after idle_timeout) and hands a connection whose header block is complete to a worker.
// Workers (created on demand, at most max_workers) run process_request over a Stream that serves
// the buffered bytes first, then the socket (the body must arrive within read_timeout of the
// headers; each write may wait write_timeout), then return the connection to the I/O thread
// (keep-alive) or close it. Only requests in progress hold a worker; a slow or idle client costs
// a file descriptor. The listening socket gets SO_REUSEADDR only: binding an address in use fails
// with that reason.
//
// Handlers run on the worker serving the connection; `close_after_response()` and
// `client_connected()` below act on that connection.
#pragma once
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <httplib.h>

namespace dsa::server {

struct HttpOptions {
  double header_timeout_s = 10;  // first byte of a request -> end of its header block
  double idle_timeout_s = 15;    // a connection with no request in progress and no byte sent
  double read_timeout_s = 30;    // end of the headers -> end of the body
  double write_timeout_s = 30;   // each write to a client that does not read
  size_t max_header_bytes = 64 * 1024;
  int max_workers = 1024;        // requests in progress at once (an open stream holds one)
  int max_requests_per_connection = 1000;

  void validate() const;  // throws dsa::Error naming the field and value
};

class HttpServer : public httplib::Server {
 public:
  explicit HttpServer(HttpOptions options);
  ~HttpServer() override;  // stop()

  // Binds host:port (0: any free port) and returns the port. Throws dsa::Error saying why it
  // cannot (address in use, not an address of this machine, permission, unknown host).
  int bind(const std::string& host, int port);
  // Runs the I/O loop on this thread until stop(); joins the workers before returning.
  void serve();
  // Closes the listening socket and every connection without a request in progress; requests
  // in progress continue, their responses close the connection. Any thread.
  void stop_accepting();
  // Ends everything: content providers see a server that is shutting down, sockets of requests
  // still in progress are shut down, serve() returns. Any thread; idempotent.
  void stop();
  // Requests being served (headers complete, response not finished).
  int64_t requests_in_progress() const { return in_progress_.load(); }

  struct Conn;

 private:
  bool process_and_close_socket(socket_t sock) override;  // unused: this class accepts itself
  void io_loop();
  void dispatch(std::unique_ptr<Conn> c);
  void worker();
  void serve_connection(std::unique_ptr<Conn> c);
  void give_back(std::unique_ptr<Conn> c);  // to the I/O thread (keep-alive)
  void wake();

  HttpOptions opt_;
  int listen_fd_ = -1;
  int wake_fd_ = -1;
  std::atomic<bool> accepting_{true}, stopping_{false};
  std::atomic<int64_t> in_progress_{0};

  std::mutex mu_;  // guards everything below
  std::condition_variable work_cv_;
  std::deque<std::unique_ptr<Conn>> queue_;     // headers complete, waiting for a worker
  std::vector<std::unique_ptr<Conn>> returned_; // back from workers, for the I/O thread
  std::set<int> busy_fds_;                      // connections a worker holds
  std::vector<std::thread> workers_;
  int idle_workers_ = 0;
};

// The connection of the request the calling worker serves:
void close_after_response();  // close it after this response (e.g. the body was left unread)
bool client_connected();      // false once the client closed its end or the socket failed
                              // (true outside a request)

}  // namespace dsa::server
