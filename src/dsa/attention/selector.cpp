#include "dsa/attention/selector.h"

#include <cstdlib>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "dsa/attention/priority.h"
#include "dsa/core/error.h"
#include "dsa/core/log.h"

namespace dsa::attn {

std::string attention_backend_from_env() {
  const char* v = std::getenv("DSA_ATTENTION_BACKEND");
  return v ? std::string(v) : std::string();
}

namespace {

std::string reasons_list(const std::vector<std::string>& r) { return fmt::format("[{}]", fmt::join(r, ", ")); }

Selection evaluate_forced(const AttentionQuery& q, const std::string& name, const std::string& source,
                          const AttentionBackendRegistry& registry) {
  const AttentionBackend* b = registry.find(name);
  if (!b)
    fail("Unknown attention backend '{}' (from {}). Known backends: {}", name, source,
         fmt::join(registry.names(), ", "));
  Selection s;
  s.forced = true;
  s.forced_source = source;
  auto r = b->reasons(q);
  if (r.empty()) {
    s.backend = b;
  } else {
    s.rejected.push_back({std::string(b->name()), r});
    s.error = fmt::format("Attention backend {} (forced by {}) is not valid for {} with {}. Reasons: {}", name,
                          source, q.platform(), q.describe(), reasons_list(r));
  }
  return s;
}

}  // namespace

Selection evaluate_attention_backends(const AttentionQuery& q, const SelectOptions& opt,
                                      const AttentionBackendRegistry& registry) {
  DSA_CHECK(!registry.empty(),
            "no attention backends are registered: call dsa::attn::register_builtin_attention_backends() first");
  std::string forced = opt.forced;
  std::string source = opt.forced_source;
  if (forced.empty() && opt.read_env) {
    forced = attention_backend_from_env();
    source = "DSA_ATTENTION_BACKEND";
  }
  if (!forced.empty()) return evaluate_forced(q, forced, source, registry);

  Selection s;
  const std::vector<std::string> order =
      opt.candidates.empty() ? attention_backend_priority(q.capability) : opt.candidates;
  for (const std::string& name : order) {
    const AttentionBackend* b = registry.find(name);
    if (!b) {
      s.rejected.push_back({name, {"not registered"}});
      continue;
    }
    auto r = b->reasons(q);
    if (!r.empty()) {
      s.rejected.push_back({name, std::move(r)});
    } else if (!s.backend) {
      s.backend = b;
    } else {
      s.other_valid.push_back(b);
    }
  }
  if (!s.backend) {
    std::vector<std::string> parts;
    for (const auto& rej : s.rejected) parts.push_back(fmt::format("{}: {}", rej.backend, reasons_list(rej.reasons)));
    s.error = fmt::format("No valid attention backend for {} with {}. Reasons: {{{}}}", q.platform(), q.describe(),
                          fmt::join(parts, ", "));
  }
  return s;
}

Selection select_attention_backend(const AttentionQuery& q, const SelectOptions& opt,
                                   const AttentionBackendRegistry& registry) {
  Selection s = evaluate_attention_backends(q, opt, registry);
  if (!s.backend) throw Error(s.error);
  if (opt.log) {
    std::vector<std::string_view> others;
    for (const auto* b : s.other_valid) others.push_back(b->name());
    if (s.forced)
      log_info("attention backend {} (forced by {}) for {} with {}", s.backend->name(), s.forced_source, q.platform(),
               q.describe());
    else
      log_info("attention backend {} for {} with {}; other valid: [{}]", s.backend->name(), q.platform(),
               q.describe(), fmt::join(others, ", "));
  }
  return s;
}

}  // namespace dsa::attn
