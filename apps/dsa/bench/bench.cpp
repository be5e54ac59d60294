#include "bench/bench.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>

#include <fmt/format.h>

#include "dsa/core/device.h"
#include "dsa/core/error.h"

namespace dsa::bench {

std::vector<Entry>& registry() {
  static std::vector<Entry> r;
  return r;
}

bool add_bench(std::string name, std::string help, Fn fn, bool model_options) {
  registry().push_back({std::move(name), std::move(help), std::move(fn), model_options});
  return true;
}

static std::string cell(const nlohmann::json& v) {
  if (v.is_number_float()) return fmt::format("{:.3g}", v.get<double>());
  if (v.is_string()) return v.get<std::string>();
  return v.dump();
}

void print_table(const std::string& title, const std::vector<Row>& rows) {
  std::vector<std::string> extra_cols;
  for (const auto& r : rows)
    for (auto it = r.extra.begin(); it != r.extra.end(); ++it)
      if (!it.value().is_structured() &&
          std::find(extra_cols.begin(), extra_cols.end(), it.key()) == extra_cols.end())
        extra_cols.push_back(it.key());
  size_t w = 4;
  for (const auto& r : rows) w = std::max(w, r.name.size());
  std::printf("\n%s\n", title.c_str());
  std::string head = fmt::format("{:<{}} {:>10} {:>9} {:>9} {:>8}", "shape", w, "us", "TFLOP/s", "GB/s", "%roof");
  for (const auto& c : extra_cols) head += fmt::format(" {:>12}", c);
  std::printf("%s\n%s\n", head.c_str(), std::string(head.size(), '-').c_str());
  for (const auto& r : rows) {
    std::string line = fmt::format("{:<{}} {:>10.2f} {:>9.1f} {:>9.1f} {:>8.1f}", r.name, w, r.us, r.tflops, r.gbs,
                                   r.roofline_pct);
    for (const auto& c : extra_cols) line += fmt::format(" {:>12}", r.extra.contains(c) ? cell(r.extra[c]) : "");
    std::printf("%s\n", line.c_str());
  }
}

void write_json(const std::string& path, const std::string& bench, const std::vector<Row>& rows) {
  nlohmann::json j;
  j["bench"] = bench;
  std::time_t now = std::time(nullptr);
  char date[32];
  std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  j["meta"]["date"] = date;
  j["meta"]["dsa_version"] = build_info().version;
  if (!cuda_devices().empty()) {
    const auto& d = cuda_devices()[0];
    j["meta"]["device"] = d.name;
    j["meta"]["capability"] = d.capability.str();
    j["meta"]["sm_count"] = d.sm_count;
  } else {
    j["meta"]["device"] = "cpu";
  }
  if (auto ov = capability_override()) j["meta"]["capability_override"] = ov->str();
  j["rows"] = nlohmann::json::array();
  for (const auto& r : rows)
    j["rows"].push_back(nlohmann::json{{"name", r.name}, {"us", r.us}, {"tflops", r.tflops}, {"gbs", r.gbs},
                                       {"roofline_pct", r.roofline_pct}, {"extra", r.extra}});
  std::ofstream f(path);
  DSA_CHECK(f.good(), "cannot write benchmark JSON to '{}'", path);
  f << j.dump(2) << "\n";
}

}  // namespace dsa::bench
