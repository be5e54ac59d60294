#include "dsa/server/metrics.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "dsa/core/error.h"

namespace dsa::server {

Histogram::Histogram(std::vector<double> upper_bounds) : bounds_(std::move(upper_bounds)) {
  DSA_CHECK(std::is_sorted(bounds_.begin(), bounds_.end()) &&
                std::adjacent_find(bounds_.begin(), bounds_.end()) == bounds_.end(),
            "histogram: bucket bounds must increase");
  counts_.assign(bounds_.size() + 1, 0);
}

void Histogram::observe(double v) {
  if (std::isnan(v)) return;
  const size_t b = static_cast<size_t>(std::lower_bound(bounds_.begin(), bounds_.end(), v) - bounds_.begin());
  std::lock_guard lk(mu_);
  ++counts_[b];
  sum_ += v;
  ++count_;
}

Histogram::Snapshot Histogram::snapshot() const {
  Snapshot s;
  s.bounds = bounds_;
  std::lock_guard lk(mu_);
  uint64_t run = 0;
  for (uint64_t c : counts_) s.cumulative.push_back(run += c);
  s.sum = sum_;
  s.count = count_;
  return s;
}

namespace {

std::string escape(const std::string& v) {
  std::string o;
  for (char c : v) {
    if (c == '\\' || c == '"') o += '\\';
    if (c == '\n') {
      o += "\\n";
      continue;
    }
    o += c;
  }
  return o;
}

std::string number(double v) {
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (std::isnan(v)) return "NaN";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{}", v);
}

}  // namespace

void PromWriter::family(const std::string& name, const char* type, const std::string& help) {
  if (name == last_family_) return;
  last_family_ = name;
  text_ += "# HELP " + name + " " + help + "\n# TYPE " + name + " " + type + "\n";
}

void PromWriter::sample(const std::string& name, const Labels& labels, double v) {
  text_ += name;
  if (!labels.empty()) {
    text_ += '{';
    for (size_t i = 0; i < labels.size(); ++i)
      text_ += (i ? "," : "") + labels[i].first + "=\"" + escape(labels[i].second) + "\"";
    text_ += '}';
  }
  text_ += " " + number(v) + "\n";
}

void PromWriter::gauge(const std::string& name, const std::string& help, double v, const Labels& labels) {
  family(name, "gauge", help);
  sample(name, labels, v);
}

void PromWriter::counter(const std::string& name, const std::string& help, double v, const Labels& labels) {
  family(name, "counter", help);
  sample(name, labels, v);
}

void PromWriter::histogram(const std::string& name, const std::string& help, const Histogram& h) {
  family(name, "histogram", help);
  const Histogram::Snapshot s = h.snapshot();
  for (size_t i = 0; i < s.bounds.size(); ++i) sample(name + "_bucket", {{"le", number(s.bounds[i])}}, static_cast<double>(s.cumulative[i]));
  sample(name + "_bucket", {{"le", "+Inf"}}, static_cast<double>(s.cumulative.back()));
  sample(name + "_sum", {}, s.sum);
  sample(name + "_count", {}, static_cast<double>(s.count));
}

ServerMetrics::ServerMetrics()
    : ttft({0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1, 2.5, 5, 7.5, 10, 20, 40, 80, 160, 640}),
      inter_token({0.001, 0.0025, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5,
                   0.75, 1, 2.5, 5, 10, 20}),
      e2e({0.05, 0.1, 0.25, 0.5, 0.8, 1, 1.5, 2, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 120, 240, 480, 960, 1920}),
      queue_time({0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 20, 40, 80, 160, 640}) {}

void ServerMetrics::count_response(int status) {
  std::lock_guard lk(mu_);
  ++responses_[status];
}

std::map<int, uint64_t> ServerMetrics::responses() const {
  std::lock_guard lk(mu_);
  return responses_;
}

}  // namespace dsa::server
