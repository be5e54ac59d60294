// Server metrics in the Prometheus text exposition format (version 0.0.4): histograms with fixed
// buckets, and a writer for one /metrics page. Thread-safe: handlers and the engine thread
// observe, /metrics renders.
#pragma once
#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace dsa::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);  // increasing; +Inf is added
  void observe(double v);
  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot snapshot() const;

 private:
  std::vector<double> bounds_;
  mutable std::mutex mu_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative), +Inf last
  double sum_ = 0;
  uint64_t count_ = 0;
};

using Labels = std::vector<std::pair<std::string, std::string>>;

// One /metrics page: each family's HELP and TYPE once, then its samples.
class PromWriter {
 public:
  void gauge(const std::string& name, const std::string& help, double v, const Labels& labels = {});
  void counter(const std::string& name, const std::string& help, double v, const Labels& labels = {});
  void histogram(const std::string& name, const std::string& help, const Histogram& h);
  const std::string& text() const { return text_; }

 private:
  void family(const std::string& name, const char* type, const std::string& help);
  void sample(const std::string& name, const Labels& labels, double v);
  std::string text_;
  std::string last_family_;
};

// What the server counts besides the engine loop's own numbers (engine_loop.h LoopStats).
struct ServerMetrics {
  ServerMetrics();
  Histogram ttft, inter_token, e2e, queue_time;  // seconds
  void count_response(int status);
  std::map<int, uint64_t> responses() const;  // by HTTP status

 private:
  mutable std::mutex mu_;
  std::map<int, uint64_t> responses_;
};

}  // namespace dsa::server
