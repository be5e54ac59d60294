// Benchmarks of `dsa bench NAME`: each bench_*.cpp registers one with add_bench() from a static
// initializer. A benchmark measures, prints a table and (with --json FILE) writes JSON rows:
// time, TFLOP/s, GB/s and % of the roofline floor. Benchmarks are not tests.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace dsa::bench {

struct Options {
  std::string json_path;  // empty: no JSON
  bool quick = false;     // fewer shapes/repeats (smoke runs)
  int device = 0;
  // Model benchmarks (Entry::model_options): a checkpoint, or a real-shape preset written with
  // fast-filled weights, the batch sizes and context to measure.
  std::string model, preset;
  int64_t layers = 0;
  // --load-format: "dummy" fills the preset's (or --model's config's) weights on the device, no
  // checkpoint written; "safetensors" writes the preset checkpoint with make-tiny first (the
  // older path); "auto" (default): dummy for a preset, the checkpoint for --model.
  std::string load_format = "auto";
  std::string batch = "1,8,32,128";
  std::string context = "512";  // comma-separated; K / M suffixes (x1024, x1048576)
  std::string graphs = "both";   // decode: "on" (CUDA graphs), "off" (eager) or "both" (each shape twice)
  std::string device_name = "cuda";  // "cpu" runs on the host (tiny presets; a smoke run)
  int tensor_parallel = 1;           // decode: ranks the model is sharded over (docs/parallelism.md)
  bool expert_parallel = false;      // decode: routed experts split by expert over those ranks
  std::string speculative;           // decode: --speculative-tokens list ("1,2,3"); empty = no speculative rows
};

struct Row {
  std::string name;        // shape label
  double us = 0;           // median time per call
  double tflops = 0;       // useful FLOPs / time
  double gbs = 0;          // unique bytes / time
  double roofline_pct = 0; // floor time / measured time * 100
  nlohmann::json extra = nlohmann::json::object();  // anything else (baseline, ratio, tactic)
};

using Fn = std::function<std::vector<Row>(const Options&)>;
struct Entry {
  std::string name, help;
  Fn fn;
  bool model_options = false;  // takes --model/--preset/--layers/--batch/--context
};
std::vector<Entry>& registry();
bool add_bench(std::string name, std::string help, Fn fn, bool model_options = false);

// Prints rows as an aligned table (extra's scalar members become columns).
void print_table(const std::string& title, const std::vector<Row>& rows);
// Writes {"bench": name, "meta": {...device, date...}, "rows": [...]}.
void write_json(const std::string& path, const std::string& bench, const std::vector<Row>& rows);

}  // namespace dsa::bench
