#ifdef DSA_WITH_SERVER
#include "serve_bench.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <limits>
#include <mutex>
#include <random>
#include <thread>

#include <fmt/format.h>
#include <httplib.h>

#include "dsa/core/error.h"

namespace dsa::bench {
namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Url {
  std::string host, prefix;
  int port = 80;
};

Url parse_url(const std::string& u) {
  const std::string scheme = "http://";
  DSA_CHECK(u.rfind(scheme, 0) == 0, "--base-url: '{}' must start with http:// (https is not supported)", u);
  std::string rest = u.substr(scheme.size());
  Url r;
  const size_t slash = rest.find('/');
  if (slash != std::string::npos) {
    r.prefix = rest.substr(slash);
    rest = rest.substr(0, slash);
    while (!r.prefix.empty() && r.prefix.back() == '/') r.prefix.pop_back();
  }
  const size_t colon = rest.rfind(':');
  if (colon != std::string::npos && rest.find(']') == std::string::npos) {
    r.host = rest.substr(0, colon);
    try {
      r.port = std::stoi(rest.substr(colon + 1));
    } catch (const std::exception&) {
      fail("--base-url: '{}' has no valid port", u);
    }
  } else {
    r.host = rest;
  }
  DSA_CHECK(!r.host.empty() && r.port > 0 && r.port < 65536, "--base-url: '{}' is not host[:port]", u);
  return r;
}

httplib::Client make_client(const Url& url, const ServeBenchOptions& o) {
  httplib::Client c(url.host, url.port);
  const auto t = static_cast<time_t>(o.request_timeout_s);
  c.set_read_timeout(t, 0);
  c.set_write_timeout(t, 0);
  c.set_connection_timeout(30, 0);
  if (!o.api_key.empty()) c.set_bearer_token_auth(o.api_key);
  return c;
}

// What one request measured.
struct Outcome {
  bool ok = false;
  std::string error;
  double ttft = 0, e2e = 0;
  std::vector<double> itl;
  int64_t input_tokens = 0, output_tokens = 0;
};

// Sends one streaming completion and times its chunks.
Outcome run_one(const Url& url, const ServeBenchOptions& o, const std::string& model, const ServeBenchRequest& r) {
  Outcome out;
  out.input_tokens = r.input_tokens;
  json body = {{"model", model},
               {"prompt", r.prompt},
               {"max_tokens", r.max_tokens},
               {"temperature", 0},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  if (o.ignore_eos) body["ignore_eos"] = true;
  httplib::Client c = make_client(url, o);
  httplib::Request req;
  req.method = "POST";
  req.path = url.prefix + o.endpoint;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  if (!o.api_key.empty()) req.set_header("Authorization", "Bearer " + o.api_key);
  std::string buf, raw;
  int64_t chunks = 0, usage_tokens = -1;
  bool done = false, failed = false;
  Clock::time_point last{};
  const Clock::time_point t0 = Clock::now();
  req.content_receiver = [&](const char* d, size_t n, uint64_t, uint64_t) {
    if (raw.size() < 2048) raw.append(d, std::min<size_t>(n, 2048 - raw.size()));
    buf.append(d, n);
    for (size_t end; (end = buf.find("\n\n")) != std::string::npos;) {
      const std::string ev = buf.substr(0, end);
      buf.erase(0, end + 2);
      if (ev.rfind("data: ", 0) != 0) continue;
      const std::string data = ev.substr(6);
      if (data == "[DONE]") {
        done = true;
        continue;
      }
      const json j = json::parse(data, nullptr, false);
      if (j.is_discarded() || j.contains("error")) {
        failed = true;
        out.error = data.substr(0, 300);
        continue;
      }
      if (j.contains("usage") && j["usage"].is_object() && j["usage"].contains("completion_tokens")) {
        usage_tokens = j["usage"]["completion_tokens"].get<int64_t>();
        if (j["usage"].contains("prompt_tokens")) out.input_tokens = j["usage"]["prompt_tokens"].get<int64_t>();
      }
      if (!j.contains("choices") || !j["choices"].is_array() || j["choices"].empty()) continue;
      const json& ch = j["choices"][0];
      const bool content = (ch.contains("text") && ch["text"].is_string() && !ch["text"].get<std::string>().empty()) ||
                           (ch.contains("token_ids") && ch["token_ids"].is_array() && !ch["token_ids"].empty());
      if (!content) continue;
      const Clock::time_point t = Clock::now();
      if (chunks == 0)
        out.ttft = std::chrono::duration<double>(t - t0).count();
      else
        out.itl.push_back(std::chrono::duration<double>(t - last).count());
      last = t;
      chunks += ch.contains("token_ids") && ch["token_ids"].is_array() ? std::max<int64_t>(1, ch["token_ids"].size()) : 1;
    }
    return true;
  };
  auto res = c.send(req);
  out.e2e = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!res) {
    out.error = "no response: " + httplib::to_string(res.error());
    return out;
  }
  if (res->status != 200) {
    out.error = fmt::format("HTTP {}: {}", res->status, raw.substr(0, 300));
    return out;
  }
  if (failed) return out;
  if (!done) {
    out.error = "the stream ended without [DONE]";
    return out;
  }
  out.output_tokens = usage_tokens >= 0 ? usage_tokens : chunks;
  out.ok = true;
  return out;
}

std::string first_model(const Url& url, const ServeBenchOptions& o) {
  httplib::Client c = make_client(url, o);
  auto r = c.Get(url.prefix + "/v1/models");
  DSA_CHECK(r, "dsa bench serve: cannot reach {}: {}", o.base_url, httplib::to_string(r.error()));
  DSA_CHECK(r->status == 200, "dsa bench serve: GET /v1/models answered {}: {}", r->status, r->body.substr(0, 300));
  const json j = json::parse(r->body, nullptr, false);
  DSA_CHECK(j.is_object() && j.contains("data") && j["data"].is_array() && !j["data"].empty() &&
                j["data"][0].contains("id") && j["data"][0]["id"].is_string(),
            "dsa bench serve: GET /v1/models gave no model (give --model)");
  return j["data"][0]["id"].get<std::string>();
}

// A counting semaphore (max_concurrency).
class Slots {
 public:
  explicit Slots(int64_t n) : free_(n) {}
  void acquire() {
    if (free_ < 0) return;
    std::unique_lock lk(mu_);
    cv_.wait(lk, [&] { return free_ > 0; });
    --free_;
  }
  void release() {
    if (free_ < 0) return;
    {
      std::lock_guard lk(mu_);
      ++free_;
    }
    cv_.notify_one();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t free_;  // -1: unbounded
};

class Progress {
 public:
  Progress(int64_t total, bool on) : total_(total), on_(on), tty_(::isatty(2)) {}
  void tick() {
    const int64_t d = ++done_;
    if (!on_) return;
    std::lock_guard lk(mu_);
    const int pct = static_cast<int>(100 * d / std::max<int64_t>(total_, 1));
    if (tty_) {
      const int w = 40, fill = pct * w / 100;
      std::fprintf(stderr, "\r[%s%s] %lld/%lld requests", std::string(fill, '#').c_str(),
                   std::string(w - fill, '.').c_str(), static_cast<long long>(d), static_cast<long long>(total_));
      if (d == total_) std::fprintf(stderr, "\n");
    } else if (pct / 10 > last_ / 10 || d == total_) {
      std::fprintf(stderr, "%lld/%lld requests (%d%%)\n", static_cast<long long>(d), static_cast<long long>(total_), pct);
    }
    last_ = pct;
  }

 private:
  int64_t total_;
  bool on_, tty_;
  std::atomic<int64_t> done_{0};
  std::mutex mu_;
  int last_ = -1;
};

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / static_cast<double>(v.size());
}

}  // namespace

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

void ServeBenchOptions::validate() const {
  DSA_CHECK(num_prompts >= 1, "--num-prompts must be >= 1, got {}", num_prompts);
  DSA_CHECK(input_len >= 1, "--random-input-len must be >= 1, got {}", input_len);
  DSA_CHECK(output_len >= 1, "--random-output-len must be >= 1, got {}", output_len);
  DSA_CHECK(range_ratio >= 0 && range_ratio < 1, "--random-range-ratio must be in [0, 1), got {}", range_ratio);
  DSA_CHECK(vocab_size > 10, "--random-vocab-size must be > 10, got {}", vocab_size);
  DSA_CHECK(request_rate >= 0, "--request-rate must be >= 0 (0 or inf: all at once), got {}", request_rate);
  DSA_CHECK(burstiness > 0, "--burstiness must be > 0, got {}", burstiness);
  DSA_CHECK(max_concurrency >= 0, "--max-concurrency must be >= 0, got {}", max_concurrency);
  DSA_CHECK(request_timeout_s > 0, "--request-timeout must be > 0, got {}", request_timeout_s);
  DSA_CHECK(dataset == "random" || dataset == "file", "--dataset-name must be random or file, got '{}'", dataset);
  DSA_CHECK(dataset != "file" || !dataset_path.empty(), "--dataset-name file needs --dataset-path");
}

std::vector<ServeBenchRequest> make_requests(const ServeBenchOptions& o) {
  std::mt19937_64 rng(o.seed);
  auto length = [&](int64_t len) {
    const int64_t lo = std::max<int64_t>(1, static_cast<int64_t>(std::floor(static_cast<double>(len) * (1 - o.range_ratio))));
    const int64_t hi = std::max(lo, static_cast<int64_t>(std::ceil(static_cast<double>(len) * (1 + o.range_ratio))));
    return lo + static_cast<int64_t>(rng() % static_cast<uint64_t>(hi - lo + 1));
  };
  std::vector<ServeBenchRequest> out;
  if (o.dataset == "random") {
    for (int64_t i = 0; i < o.num_prompts; ++i) {
      ServeBenchRequest r;
      r.input_tokens = length(o.input_len);
      r.max_tokens = length(o.output_len);
      json ids = json::array();
      for (int64_t t = 0; t < r.input_tokens; ++t) ids.push_back(10 + static_cast<int64_t>(rng() % static_cast<uint64_t>(o.vocab_size - 10)));
      r.prompt = std::move(ids);
      out.push_back(std::move(r));
    }
    return out;
  }
  std::ifstream in(o.dataset_path);
  DSA_CHECK(in.good(), "--dataset-path: cannot read {}", o.dataset_path);
  std::vector<ServeBenchRequest> file;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    ServeBenchRequest r;
    r.max_tokens = o.output_len;
    const json j = line.front() == '{' ? json::parse(line, nullptr, false) : json();
    if (j.is_object()) {
      DSA_CHECK(j.contains("prompt") && (j["prompt"].is_string() || j["prompt"].is_array()),
                "{}:{}: a JSON line needs \"prompt\" (text or token ids)", o.dataset_path, n);
      r.prompt = j["prompt"];
      if (j.contains("max_tokens") && j["max_tokens"].is_number_integer()) r.max_tokens = j["max_tokens"].get<int64_t>();
      if (j["prompt"].is_array()) r.input_tokens = static_cast<int64_t>(j["prompt"].size());
    } else {
      r.prompt = line;
    }
    file.push_back(std::move(r));
  }
  DSA_CHECK(!file.empty(), "--dataset-path: {} holds no prompts", o.dataset_path);
  for (int64_t i = 0; i < o.num_prompts; ++i) out.push_back(file[static_cast<size_t>(i) % file.size()]);
  return out;
}

json run_serve_bench(const ServeBenchOptions& o) {
  o.validate();
  const Url url = parse_url(o.base_url);
  const std::string model = o.model.empty() ? first_model(url, o) : o.model;
  const std::vector<ServeBenchRequest> reqs = make_requests(o);
  // Arrival offsets: all at 0, or gamma-distributed gaps with mean 1 / rate.
  std::vector<double> arrival(reqs.size(), 0.0);
  const bool paced = o.request_rate > 0 && std::isfinite(o.request_rate);
  if (paced) {
    std::mt19937_64 rng(o.seed + 1);
    std::gamma_distribution<double> gap(o.burstiness, 1.0 / (o.request_rate * o.burstiness));
    double t = 0;
    for (double& a : arrival) {
      a = t;
      t += gap(rng);
    }
  }
  std::printf("dsa bench serve: %s%s, model %s, %zu requests, rate %s, max concurrency %s\n", o.base_url.c_str(),
              o.endpoint.c_str(), model.c_str(), reqs.size(), paced ? fmt::format("{}/s", o.request_rate).c_str() : "inf",
              o.max_concurrency > 0 ? std::to_string(o.max_concurrency).c_str() : "none");
  std::fflush(stdout);

  std::vector<Outcome> outcomes(reqs.size());
  Slots slots(o.max_concurrency > 0 ? o.max_concurrency : -1);
  Progress progress(static_cast<int64_t>(reqs.size()), o.progress);
  std::vector<std::thread> threads;
  threads.reserve(reqs.size());
  const Clock::time_point start = Clock::now();
  for (size_t i = 0; i < reqs.size(); ++i) {
    std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrival[i])));
    slots.acquire();
    threads.emplace_back([&, i] {
      try {
        outcomes[i] = run_one(url, o, model, reqs[i]);
      } catch (const std::exception& e) {
        outcomes[i].error = e.what();
      }
      slots.release();
      progress.tick();
    });
  }
  for (auto& t : threads) t.join();
  const double duration = std::chrono::duration<double>(Clock::now() - start).count();

  std::vector<double> ttft, tpot, itl, e2e;
  int64_t ok = 0, in_tokens = 0, out_tokens = 0;
  json errors = json::array();
  for (const Outcome& x : outcomes) {
    if (!x.ok) {
      if (errors.size() < 5) errors.push_back(x.error);
      continue;
    }
    ++ok;
    in_tokens += x.input_tokens;
    out_tokens += x.output_tokens;
    ttft.push_back(x.ttft * 1e3);
    e2e.push_back(x.e2e * 1e3);
    if (x.output_tokens > 1) tpot.push_back((x.e2e - x.ttft) * 1e3 / static_cast<double>(x.output_tokens - 1));
    for (double g : x.itl) itl.push_back(g * 1e3);
  }
  json r = {{"backend", "openai"},
            {"base_url", o.base_url},
            {"endpoint", o.endpoint},
            {"model", model},
            {"dataset", o.dataset},
            {"num_prompts", reqs.size()},
            {"request_rate", paced ? json(o.request_rate) : json("inf")},
            {"burstiness", o.burstiness},
            {"max_concurrency", o.max_concurrency > 0 ? json(o.max_concurrency) : json(nullptr)},
            {"random_input_len", o.input_len},
            {"random_output_len", o.output_len},
            {"completed", ok},
            {"failed", static_cast<int64_t>(reqs.size()) - ok},
            {"errors", errors},
            {"duration_s", duration},
            {"total_input_tokens", in_tokens},
            {"total_output_tokens", out_tokens},
            {"request_throughput", ok / duration},
            {"output_throughput", static_cast<double>(out_tokens) / duration},
            {"total_token_throughput", static_cast<double>(in_tokens + out_tokens) / duration}};
  auto stats = [&](const char* name, const std::vector<double>& v) {
    r[fmt::format("mean_{}_ms", name)] = mean(v);
    r[fmt::format("median_{}_ms", name)] = percentile(v, 50);
    r[fmt::format("p99_{}_ms", name)] = percentile(v, 99);
  };
  stats("ttft", ttft);
  stats("tpot", tpot);
  stats("itl", itl);
  stats("e2el", e2e);

  auto row = [](const std::string& k, const std::string& v) { std::printf("%-40s %14s\n", k.c_str(), v.c_str()); };
  auto num = [](double v) { return fmt::format("{:.2f}", v); };
  std::printf("%s\n", std::string(24, '=').append(" Serving Benchmark Result ").append(24, '=').c_str());
  row("Successful requests:", std::to_string(ok));
  row("Failed requests:", std::to_string(static_cast<int64_t>(reqs.size()) - ok));
  row("Benchmark duration (s):", num(duration));
  row("Total input tokens:", std::to_string(in_tokens));
  row("Total generated tokens:", std::to_string(out_tokens));
  row("Request throughput (req/s):", num(r["request_throughput"].get<double>()));
  row("Output token throughput (tok/s):", num(r["output_throughput"].get<double>()));
  row("Total token throughput (tok/s):", num(r["total_token_throughput"].get<double>()));
  for (const auto& [key, title] : std::vector<std::pair<std::string, std::string>>{
           {"ttft", "Time to First Token"}, {"tpot", "Time per Output Token (excl. 1st token)"},
           {"itl", "Inter-token Latency"}, {"e2el", "End-to-end Latency"}}) {
    std::printf("%s\n", fmt::format("{:-^74}", title).c_str());
    for (const char* s : {"mean", "median", "p99"})
      row(fmt::format("{} {} (ms):", s == std::string("mean") ? "Mean" : s == std::string("median") ? "Median" : "P99",
                      key == "e2el" ? "E2EL" : key == "ttft" ? "TTFT" : key == "tpot" ? "TPOT" : "ITL"),
          num(r[fmt::format("{}_{}_ms", s, key)].get<double>()));
  }
  std::printf("%s\n", std::string(74, '=').c_str());
  for (const auto& e : errors) std::printf("error: %s\n", e.get<std::string>().c_str());
  std::fflush(stdout);
  if (!o.json_path.empty()) {
    std::ofstream f(o.json_path);
    DSA_CHECK(f.good(), "--json: cannot write {}", o.json_path);
    f << r.dump(2) << "\n";
  }
  return r;
}

}  // namespace dsa::bench
#endif  // DSA_WITH_SERVER
