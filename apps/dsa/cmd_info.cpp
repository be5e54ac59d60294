// `dsa info [--json]`: version, build (CUDA version, archs), devices with capabilities, and the
// capability override when one is in force.
#include <cstdio>

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "dsa/attention/priority.h"
#include "dsa/attention/registry.h"
#include "dsa/core/device.h"

namespace dsa::cli {
namespace {

std::string cuda_version_str(int v) { return v ? fmt::format("{}.{}", v / 1000, (v % 1000) / 10) : "none"; }

nlohmann::json info_json() {
  BuildInfo b = build_info();
  nlohmann::json j;
  j["version"] = b.version;
  j["build"] = {{"cuda", b.cuda},
                {"cuda_compiler", b.cuda_compiler_version},
                {"cuda_archs", b.cuda_archs},
                {"cuda_runtime", cuda_version_str(b.cuda_runtime_version)},
                {"cuda_driver", cuda_version_str(b.cuda_driver_version)}};
  nlohmann::json devs = nlohmann::json::array();
  devs.push_back(nlohmann::json{{"device", "cpu"}});
  for (const auto& d : cuda_devices()) {
    devs.push_back(nlohmann::json{{"device", fmt::format("cuda:{}", d.index)},
                    {"name", d.name},
                    {"capability", d.capability.str()},
                    {"sm_count", d.sm_count},
                    {"memory_bytes", d.total_memory},
                    {"max_smem_per_block", d.max_smem_per_block_optin},
                    {"l2_bytes", d.l2_bytes}});
  }
  j["devices"] = devs;
  if (cuda_devices().empty()) j["cuda_unavailable"] = cuda_unavailable_reason();
  auto ov = capability_override();
  j["capability_override"] = ov ? nlohmann::json(ov->str()) : nlohmann::json(nullptr);
  auto eff = effective_capability(0);
  j["effective_capability"] = eff ? nlohmann::json(eff->str()) : nlohmann::json("none (CPU only)");
  attn::register_builtin_attention_backends();
  nlohmann::json backends = nlohmann::json::array();
  for (const auto* b : attn::attention_backend_registry().all()) {
    std::vector<std::string> kv, dt;
    for (auto d : b->supported_kv_cache_dtypes()) kv.emplace_back(attn::kv_cache_dtype_name(d));
    for (auto d : b->supported_dtypes()) dt.emplace_back(dtype_name(d));
    auto hc = b->supported_head_counts();
    backends.push_back({{"name", std::string(b->name())},
                        {"description", std::string(b->description())},
                        {"platform", b->runs_on_gpu() ? "cuda " + b->capability_requirement() : "cpu"},
                        {"dtypes", dt},
                        {"kv_cache_dtypes", kv},
                        {"head_sizes", b->supported_head_sizes()},
                        {"head_counts", hc ? nlohmann::json(*hc) : nlohmann::json("any")},
                        {"page_sizes", b->supported_page_sizes().describe()},
                        {"sink", b->supports_sink()}});
  }
  j["attention_backends"] = backends;
  nlohmann::json prio = nlohmann::json::object();
  for (const auto& row : attn::attention_priority_table()) prio[row.platform] = row.backends;
  j["attention_priority"] = prio;
  return j;
}

void print_text(const nlohmann::json& j) {
  std::printf("dsa %s\n", j["version"].get<std::string>().c_str());
  const auto& b = j["build"];
  if (b["cuda"].get<bool>())
    std::printf("build: CUDA %s, archs %s; runtime %s, driver %s\n", b["cuda_compiler"].get<std::string>().c_str(),
                b["cuda_archs"].get<std::string>().c_str(), b["cuda_runtime"].get<std::string>().c_str(),
                b["cuda_driver"].get<std::string>().c_str());
  else
    std::printf("build: CPU only (no CUDA)\n");
  std::printf("devices:\n  cpu\n");
  for (const auto& d : j["devices"]) {
    if (d["device"] == "cpu") continue;
    std::printf("  %s: %s, capability %s, %d SMs, %.1f GiB, %zu B shared memory per block\n",
                d["device"].get<std::string>().c_str(), d["name"].get<std::string>().c_str(),
                d["capability"].get<std::string>().c_str(), d["sm_count"].get<int>(),
                d["memory_bytes"].get<double>() / (1024.0 * 1024 * 1024), d["max_smem_per_block"].get<size_t>());
  }
  if (j.contains("cuda_unavailable"))
    std::printf("  (no CUDA device: %s)\n", j["cuda_unavailable"].get<std::string>().c_str());
  if (!j["capability_override"].is_null())
    std::printf("capability override: DSA_DEVICE_CAPABILITY=%s is in force; selection acts as on %s\n",
                j["capability_override"].get<std::string>().c_str(), j["capability_override"].get<std::string>().c_str());
  std::printf("effective capability: %s\n", j["effective_capability"].get<std::string>().c_str());
  std::printf("attention backends (dsa select --model M shows the choice per layer type):\n");
  for (const auto& b : j["attention_backends"])
    std::printf("  %-16s %s; kv %s; d_qk %s; page sizes %s\n", b["name"].get<std::string>().c_str(),
                b["platform"].get<std::string>().c_str(), b["kv_cache_dtypes"].dump().c_str(),
                b["head_sizes"].dump().c_str(), b["page_sizes"].get<std::string>().c_str());
}

const bool registered = add_command([](CLI::App& app) {
  auto* cmd = app.add_subcommand("info", "Version, build, devices and capabilities");
  auto json = std::make_shared<bool>(false);
  cmd->add_flag("--json", *json, "Print JSON");
  cmd->callback([json] {
    auto j = info_json();
    if (*json)
      std::printf("%s\n", j.dump(2).c_str());
    else
      print_text(j);
  });
});

}  // namespace
}  // namespace dsa::cli
