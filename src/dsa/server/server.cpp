#include "dsa/server/server.h"

#include <thread>

#include "dsa/core/error.h"
#include "dsa/core/log.h"
#include "dsa/server/routes.h"
#include "dsa/server/server_context.h"

namespace dsa::server {

void ServerOptions::validate() const {
  DSA_CHECK(port >= 0 && port <= 65535, "server: port must be in [0, 65535], got {}", port);
  DSA_CHECK(max_request_bytes >= 1024, "server: max request bytes must be >= 1024, got {}", max_request_bytes);
  DSA_CHECK(max_queue >= 0, "server: max queue must be >= 0 (0: no bound), got {}", max_queue);
  for (const std::string& o : allowed_origins) DSA_CHECK(!o.empty(), "server: an empty allowed origin");
  http.validate();
}

Server::Server(engine::Engine& engine, ServerOptions options)
    : engine_(engine), opt_(std::move(options)), loop_(engine, opt_.max_queue, &metrics_) {
  opt_.validate();
  http_ = std::make_unique<HttpServer>(opt_.http);
  ctx_ = std::make_unique<ServerContext>(ServerContext{engine_, loop_, opt_, metrics_, *http_});
  add_basic_routes(*ctx_);
  add_completion_routes(*ctx_);
  add_chat_routes(*ctx_);
  install_common_handlers(*ctx_);
}

Server::~Server() {
  stop();
  http_.reset();  // (listen() has returned: its owner joined it)
}

int Server::bind() {
  port_ = http_->bind(opt_.host, opt_.port);
  loop_.start();
  return port_;
}

void Server::listen() {
  DSA_CHECK(port_ > 0, "server: listen() before bind()");
  http_->serve();
}

void Server::shutdown(std::chrono::milliseconds drain) {
  using Clock = std::chrono::steady_clock;
  const int64_t want = std::chrono::duration_cast<std::chrono::nanoseconds>((Clock::now() + drain).time_since_epoch()).count();
  for (int64_t cur = drain_deadline_ns_.load(); want < cur && !drain_deadline_ns_.compare_exchange_weak(cur, want);) {
  }
  http_->stop_accepting();
  loop_.stop_accepting();
  std::lock_guard lk(shutdown_mu_);
  auto deadline = [&] { return Clock::time_point(std::chrono::nanoseconds(drain_deadline_ns_.load())); };
  if (http_->requests_in_progress() > 0 && Clock::now() < deadline())
    log_info("server: stopping: waiting up to {:.1f} s for {} request(s) in progress",
             std::chrono::duration<double>(deadline() - Clock::now()).count(), http_->requests_in_progress());
  while (http_->requests_in_progress() > 0 && Clock::now() < deadline())
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  if (loop_.num_open() > 0) {
    log_info("server: stopping: aborting {} sequence(s)", loop_.num_open());
    loop_.abort_all("the server is shutting down");
  }
  // The aborted requests' handlers write their last chunk or error and return.
  for (const Clock::time_point until = Clock::now() + std::chrono::seconds(5);
       http_->requests_in_progress() > 0 && Clock::now() < until;)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  http_->stop();
  loop_.stop();
}

}  // namespace dsa::server
