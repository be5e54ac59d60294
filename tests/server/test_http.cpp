// The HTTP layer against hostile and careless clients, on loopback with raw sockets where
// httplib's client would not misbehave: an address in use is refused, bodies over the limit are
// refused unread (Content-Length and chunked), slow header senders do not block /health and are
// cut at the header timeout, idle connections close, conflicting Content-Length /
// Transfer-Encoding are refused, pipelined requests are answered in order, an exception in a
// content provider (a decoder that throws) ends the stream with an error event and the server
// lives on, a client that goes away aborts its request (streamed or not) and its KV pages are
// freed, API key, CORS, /v1/models/{id}, a full queue (503 + Retry-After), a KV cache that can
// never hold a request (400), and shutdown with open streams. Every wait is bounded.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "dsa/core/error.h"
#include "dsa/server/http_server.h"
#include "server_harness.h"

namespace dsa::server {
namespace {

using json = nlohmann::json;
using namespace dsa::server::test;
using Clock = std::chrono::steady_clock;

// A plain TCP client: connect, send bytes, read what comes until the server closes or a timeout.
class Raw {
 public:
  explicit Raw(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ok_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
  }
  ~Raw() { close(); }
  bool ok() const { return ok_; }
  bool send(const std::string& s) { return ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size()); }
  // Reads until the peer closes, `until` appears, or `timeout` passes.
  std::string read(std::chrono::milliseconds timeout, const std::string& until = {}) {
    const auto end = Clock::now() + timeout;
    while (Clock::now() < end) {
      if (!until.empty() && got_.find(until) != std::string::npos) break;
      pollfd p{fd_, POLLIN, 0};
      const int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(end - Clock::now()).count());
      if (::poll(&p, 1, std::max(left, 1)) <= 0) continue;
      char buf[8192];
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) {
        closed_ = true;
        break;
      }
      got_.append(buf, static_cast<size_t>(n));
    }
    return got_;
  }
  bool closed_by_peer() const { return closed_; }
  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  bool ok_ = false, closed_ = false;
  std::string got_;
};

int status_of(const std::string& response) {
  if (response.rfind("HTTP/1.1 ", 0) != 0) return -1;
  return std::atoi(response.c_str() + 9);
}

TEST(Http, AddressInUseIsRefused) {
  HttpServer a{HttpOptions{}};
  const int port = a.bind("127.0.0.1", 0);
  HttpServer b{HttpOptions{}};
  try {
    b.bind("127.0.0.1", port);
    FAIL() << "a second server bound a port in use";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("already in use"), std::string::npos) << e.what();
  }
  HttpServer c{HttpOptions{}};
  EXPECT_THROW(c.bind("203.0.113.7", 0), Error);  // not an address of this machine
}

class HttpTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ServerOptions so;
    so.model_name = "tiny-glm";
    so.max_request_bytes = 64 * 1024;
    so.http.header_timeout_s = 2;
    so.http.idle_timeout_s = 1;
    so.http.max_workers = 8;  // few workers: slow clients would starve them if they held one
    h_ = new Harness(so);
  }
  static void TearDownTestSuite() {
    delete h_;
    h_ = nullptr;
  }
  static inline Harness* h_ = nullptr;
};

TEST_F(HttpTest, BodiesOverTheLimitAreRefusedUnread) {
  Raw big(h_->port);
  ASSERT_TRUE(big.ok());
  const auto t0 = Clock::now();
  big.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 50000000\r\n\r\n{");
  const std::string r = big.read(std::chrono::seconds(5));
  EXPECT_EQ(status_of(r), 413) << r;
  EXPECT_NE(r.find("exceeds the limit"), std::string::npos) << r;
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(3));
  EXPECT_TRUE(big.closed_by_peer());
  // Chunked: read up to the limit, then refused.
  Raw chunked(h_->port);
  chunked.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
  const std::string piece(16 * 1024, ' ');
  char head[32];
  std::snprintf(head, sizeof(head), "%zx\r\n", piece.size());
  for (int i = 0; i < 8; ++i)
    if (!chunked.send(head + piece + "\r\n")) break;
  const std::string c = chunked.read(std::chrono::seconds(5), "\r\n\r\n{");
  EXPECT_EQ(status_of(c), 413) << c;
  // Within the limit: served.
  json body = {{"prompt", {3, 4}}, {"max_tokens", 1}};
  std::string padded = body.dump();
  padded.insert(1, std::string(60 * 1024, ' '));
  auto ok = h_->client().Post("/v1/completions", padded, "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
}

TEST_F(HttpTest, ConflictingFramingIsRefused) {
  for (const std::string& headers : {std::string("Content-Length: 2\r\nTransfer-Encoding: chunked\r\n"),
                                     std::string("Transfer-Encoding: gzip, chunked\r\n"),
                                     std::string("Content-Length: abc\r\n"),
                                     std::string("Content-Length: 2\r\nContent-Length: 3\r\n")}) {
    Raw c(h_->port);
    c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\n" + headers + "\r\n{}");
    const std::string r = c.read(std::chrono::seconds(5));
    EXPECT_EQ(status_of(r), 400) << headers << " -> " << r;
    EXPECT_NE(r.find("\"error\""), std::string::npos) << r;
    EXPECT_TRUE(c.closed_by_peer()) << headers;
  }
}

TEST_F(HttpTest, SlowHeaderSendersDoNotBlockHealthAndAreCut) {
  std::vector<std::unique_ptr<Raw>> slow;
  for (int i = 0; i < 64; ++i) {
    slow.push_back(std::make_unique<Raw>(h_->port));
    slow.back()->send("POST /v1/completions HTTP/1.1\r\n");
  }
  for (int round = 0; round < 3; ++round) {  // a header line each 0.5 s, 1.5 s in all
    for (auto& s : slow) s->send("X-Slow: " + std::to_string(round) + "\r\n");
    const auto t0 = Clock::now();
    auto r = h_->client().Get("/health");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(1000)) << "round " << round;
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  }
  // The header timeout (2 s from the first byte) closes them with a 408.
  int timed_out = 0;
  for (auto& s : slow) {
    const std::string r = s->read(std::chrono::seconds(3));
    timed_out += status_of(r) == 408 && s->closed_by_peer();
  }
  EXPECT_EQ(timed_out, 64);
}

TEST_F(HttpTest, IdleConnectionsCloseAndPipelinedRequestsAreAnswered) {
  Raw idle(h_->port);
  const auto t0 = Clock::now();
  idle.read(std::chrono::seconds(4));
  EXPECT_TRUE(idle.closed_by_peer());
  EXPECT_LT(Clock::now() - t0, std::chrono::milliseconds(3000));
  Raw p(h_->port);
  p.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\nGET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n");
  const std::string r = p.read(std::chrono::seconds(5), "tiny-glm");
  EXPECT_EQ(status_of(r), 200);
  EXPECT_NE(r.find("\"ok\""), std::string::npos);
  EXPECT_NE(r.find("tiny-glm"), std::string::npos) << r;
  EXPECT_LT(r.find("\"ok\""), r.find("tiny-glm"));
}

TEST_F(HttpTest, ModelsByIdAndUnknownRoutes) {
  auto m = h_->client().Get("/v1/models/tiny-glm");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  EXPECT_EQ(json::parse(m->body)["id"], "tiny-glm");
  auto x = h_->client().Get("/v1/models/gpt-4");
  ASSERT_TRUE(x);
  EXPECT_EQ(x->status, 404);
  EXPECT_EQ(json::parse(x->body)["error"]["code"], 404);
  auto post = h_->client().Post("/v1/nothing", "{}", "application/json");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 404);
  EXPECT_TRUE(json::parse(post->body).contains("error"));
}

// A client that closes its connection while its request generates: streamed or not, the
// request is aborted and its KV pages come free (the KV-usage metric returns to 0).
TEST_F(HttpTest, DisconnectsAbortAndFreeKvPages) {
  const std::string used = "dsa_kv_cache_used_pages{group=\"tokens\"}";
  for (bool stream : {false, true}) {
    const double aborted0 = metric_value(h_->metrics(), "dsa_requests_finished_total{reason=\"abort\"}");
    Raw c(h_->port);
    const std::string body =
        json{{"prompt", prompt_of(40, 5)}, {"max_tokens", 200}, {"ignore_eos", true}, {"stream", stream}}.dump();
    c.send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\n\r\n" + body);
    double pages = 0;
    for (int i = 0; i < 200 && pages <= 0; ++i) {  // up to 10 s for the request to hold pages
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      pages = metric_value(h_->metrics(), used);
    }
    EXPECT_GT(pages, 0) << "stream " << stream;
    c.close();
    double aborted = aborted0, running = -1;
    for (int i = 0; i < 200 && !(aborted > aborted0 && running == 0 && pages == 0); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      const std::string m = h_->metrics();
      aborted = metric_value(m, "dsa_requests_finished_total{reason=\"abort\"}");
      running = metric_value(m, "dsa_requests_running");
      pages = metric_value(m, used);
    }
    EXPECT_EQ(aborted, aborted0 + 1) << "stream " << stream;
    EXPECT_EQ(running, 0);
    EXPECT_EQ(pages, 0);
  }
}

TEST(HttpDecode, AThrowingDecoderNeverKillsTheServer) {
  ServerOptions so;
  so.decode = [](const std::vector<int32_t>&, bool) -> std::string { throw std::runtime_error("decoder exploded"); };
  so.encode = [](const std::string& s, bool) {
    std::vector<int32_t> v;
    for (char c : s) v.push_back(static_cast<unsigned char>(c) & 0x7f);
    return v;
  };
  Harness h(so);
  const json body = {{"prompt", {3, 4, 5}}, {"max_tokens", 4}, {"ignore_eos", true}};
  for (int rep = 0; rep < 2; ++rep) {
    json s = body;
    s["stream"] = true;
    auto r = h.post(s);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200);
    const auto data = sse_data(r->body);
    ASSERT_GE(data.size(), 2u) << r->body;
    EXPECT_EQ(data.back(), "[DONE]");
    const json last = json::parse(data[data.size() - 2]);
    ASSERT_TRUE(last.contains("error")) << r->body;
    EXPECT_NE(last["error"]["message"].get<std::string>().find("decoder exploded"), std::string::npos);
    auto w = h.post(body);
    ASSERT_TRUE(w);
    EXPECT_EQ(w->status, 500);
    EXPECT_NE(w->body.find("decoder exploded"), std::string::npos);
    auto d = h.post({{"tokens", {3, 4}}}, "/detokenize");
    ASSERT_TRUE(d);
    EXPECT_EQ(d->status, 400);
  }
  auto health = h.client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  double running = -1;  // the failed requests' sequences were aborted (asynchronously)
  for (int i = 0; i < 200 && running != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    running = metric_value(h.metrics(), "dsa_requests_running");
  }
  EXPECT_EQ(running, 0);
}

TEST(HttpAuth, ApiKeyAndCors) {
  ServerOptions so;
  so.model_name = "m";
  so.api_key = "sekret";
  so.allowed_origins = {"http://app.example"};
  Harness h(so);
  auto c = h.client();
  EXPECT_EQ(c.Get("/health")->status, 200);
  EXPECT_EQ(c.Get("/metrics")->status, 200);
  auto no = c.Get("/v1/models");
  ASSERT_TRUE(no);
  EXPECT_EQ(no->status, 401);
  EXPECT_EQ(json::parse(no->body)["error"]["code"], "invalid_api_key");
  EXPECT_EQ(c.Get("/v1/models", {{"Authorization", "Bearer wrong"}})->status, 401);
  EXPECT_EQ(c.Post("/v1/completions", R"({"prompt": [1]})", "application/json")->status, 401);
  const httplib::Headers auth{{"Authorization", "Bearer sekret"}, {"Origin", "http://app.example"}};
  auto yes = c.Get("/v1/models", auth);
  ASSERT_TRUE(yes);
  EXPECT_EQ(yes->status, 200);
  EXPECT_EQ(yes->get_header_value("Access-Control-Allow-Origin"), "http://app.example");
  auto other = c.Get("/v1/models", {{"Authorization", "Bearer sekret"}, {"Origin", "http://evil.example"}});
  EXPECT_FALSE(other->has_header("Access-Control-Allow-Origin"));
  auto ok = c.Post("/v1/completions", auth, R"({"prompt": [1, 2], "max_tokens": 1})", "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  auto pre = c.Options("/v1/completions", {{"Origin", "http://app.example"},
                                           {"Access-Control-Request-Method", "POST"},
                                           {"Access-Control-Request-Headers", "authorization, content-type"}});
  ASSERT_TRUE(pre);
  EXPECT_EQ(pre->status, 204);
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Origin"), "http://app.example");
  EXPECT_NE(pre->get_header_value("Access-Control-Allow-Methods").find("POST"), std::string::npos);
  EXPECT_EQ(pre->get_header_value("Access-Control-Allow-Headers"), "authorization, content-type");
}

// max_queue 2 with 4 sequences running: 2 more may wait, the next is a 503 with Retry-After;
// a request that alone asks for more than the queue holds is a 400 (retrying cannot help).
TEST(HttpQueue, AFullQueueIs503WithRetryAfter) {
  ServerOptions so;
  so.max_queue = 2;
  Harness h(so);
  std::vector<std::unique_ptr<Raw>> running;
  auto start = [&](int n) {
    const std::string body =
        json{{"prompt", {5, 6, 7}}, {"max_tokens", 240}, {"n", n}, {"ignore_eos", true}, {"stream", true}}.dump();
    running.push_back(std::make_unique<Raw>(h.port));
    running.back()->send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\n\r\n" + body);
    return running.back()->read(std::chrono::seconds(10), "data: ");
  };
  auto wait_running = [&](double want) {
    double r = 0;
    for (int i = 0; i < 400 && r < want; ++i) {  // up to 20 s
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      r = metric_value(h.metrics(), "dsa_requests_running");
    }
    return r;
  };
  EXPECT_EQ(status_of(start(2)), 200);
  EXPECT_EQ(wait_running(2), 2);  // admitted: no longer queued
  EXPECT_EQ(status_of(start(2)), 200);
  const double r = wait_running(4);  // the 4 sequences run (max_running 4)
  ASSERT_EQ(r, 4);
  const std::string waiting =
      json{{"prompt", {5, 6, 7}}, {"max_tokens", 240}, {"n", 2}, {"ignore_eos", true}, {"stream", true}}.dump();
  running.push_back(std::make_unique<Raw>(h.port));
  running.back()->send("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                       std::to_string(waiting.size()) + "\r\n\r\n" + waiting);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // submitted: 2 sequences wait
  auto full = h.post({{"prompt", {5}}, {"max_tokens", 1}});
  ASSERT_TRUE(full);
  EXPECT_EQ(full->status, 503) << full->body;
  EXPECT_EQ(full->get_header_value("Retry-After"), "1");
  EXPECT_EQ(json::parse(full->body)["error"]["code"], 503);
  auto huge = h.post({{"prompt", {5}}, {"max_tokens", 1}, {"best_of", 3}});
  ASSERT_TRUE(huge);
  EXPECT_EQ(huge->status, 400) << huge->body;
  running.clear();  // the clients go away: their sequences are aborted
  double open = -1;
  for (int i = 0; i < 200 && open != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const std::string m = h.metrics();
    open = metric_value(m, "dsa_requests_running") + metric_value(m, "dsa_requests_waiting");
  }
  EXPECT_EQ(open, 0);
  auto after = h.post({{"prompt", {5}}, {"max_tokens", 1}});
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 200);
}

TEST(HttpKv, ARequestTheKvCacheCanNeverHoldIs400) {
  HarnessOptions ho;
  ho.kv_pages = 2;  // 128 tokens
  Harness h(ServerOptions{}, ho);
  auto r = h.post({{"prompt", prompt_of(100, 1)}, {"max_tokens", 50}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["error"]["param"], "max_tokens");
  EXPECT_NE(j["error"]["message"].get<std::string>().find("KV cache"), std::string::npos);
  r = h.post({{"prompt", prompt_of(130, 1)}, {"max_tokens", 1}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["param"], "prompt");
  // Without max_tokens: as many as the KV cache holds.
  r = h.post({{"prompt", prompt_of(120, 1)}, {"ignore_eos", true}, {"temperature", 0}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(json::parse(r->body)["usage"]["completion_tokens"], 8);
}

// shutdown(): new connections are refused; a stream that cannot finish within the drain time
// ends with a final chunk (finish_reason "abort") and [DONE]; one that can finishes normally.
TEST(HttpShutdown, OpenStreamsEndWithAFinalChunk) {
  Harness h{ServerOptions{}};
  std::string long_body, short_body;
  std::atomic<int> chunks{0};
  auto run = [&](int64_t max_tokens, std::string* out) {
    httplib::Request req;
    req.method = "POST";
    req.path = "/v1/completions";
    req.body = json{{"prompt", {5, 6, 7}}, {"max_tokens", max_tokens}, {"ignore_eos", true}, {"stream", true}}.dump();
    req.set_header("Content-Type", "application/json");
    req.content_receiver = [&, out](const char* d, size_t n, uint64_t, uint64_t) {
      out->append(d, n);
      ++chunks;
      return true;
    };
    h.client().send(req);
  };
  std::thread a([&] { run(250, &long_body); });
  for (int i = 0; i < 200 && chunks < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_GE(chunks, 2);
  std::thread b([&] { run(3, &short_body); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  std::thread stopper([&] { h.server->shutdown(std::chrono::milliseconds(1500)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  Raw refused(h.port);
  EXPECT_FALSE(refused.ok() && refused.send("GET /health HTTP/1.1\r\n\r\n") &&
               status_of(refused.read(std::chrono::seconds(2))) == 200)
      << "a new connection was served during shutdown";
  a.join();
  b.join();
  stopper.join();
  for (const auto* body : {&long_body, &short_body}) {
    const auto data = sse_data(*body);
    ASSERT_GE(data.size(), 2u) << *body;
    EXPECT_EQ(data.back(), "[DONE]");
    const json last = json::parse(data[data.size() - 2]);
    ASSERT_FALSE(last["choices"].empty()) << *body;
    const std::string want = body == &long_body ? "abort" : "length";
    EXPECT_EQ(last["choices"][0]["finish_reason"], want);
  }
}

}  // namespace
}  // namespace dsa::server
