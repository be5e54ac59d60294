#include "dsa/tune/active_tuning.h"

#include <fmt/format.h>

#include "dsa/core/log.h"

namespace dsa::tune {

namespace {

// Whether a sparse-MLA call has the static shape the instance was tuned for.
bool matches(const SparseMlaTuneConfig& c, const ops::SparseMlaParams& p) {
  if (c.kind != p.main.cache.kind || c.heads != p.heads() || c.main_page != p.main.cache.page_size ||
      !p.main.indices.defined() || c.main_keys != p.main.indices.size(1) || c.sink != p.sink.defined())
    return false;
  const bool extra = c.extra_keys > 0 || !c.extra_key_buckets.empty();
  if (extra != p.extra.has_value()) return false;
  if (!extra) return true;
  if (c.extra_page != p.extra->cache.page_size || !p.extra->indices.defined()) return false;
  return !c.extra_key_buckets.empty() || c.extra_keys == p.extra->indices.size(1);
}

bool matches(const MoeGemmTuneConfig& c, const ops::ExpertGemmShape& s) {
  return c.format == s.format && c.experts == s.experts && c.topk == s.topk && c.n == s.n && c.k == s.k &&
         c.fuse_swiglu == s.fuse_swiglu && c.alignment == s.alignment;
}

}  // namespace

void copy_table(const TuningTable& from, TuningTable& to) {
  for (const auto& [family, f] : from.snapshot())
    for (const auto& [key, e] : f.entries) to.load_entry(family, f.signature, key, e);
}

TableTacticChooser::TableTacticChooser(std::vector<std::unique_ptr<TunableOp>> ops, const TuningTable& table,
                                       EngineLimits limits, std::string where)
    : ops_(std::move(ops)), limits_(limits), where_(std::move(where)) {
  limits_.validate();
  for (const auto& op : ops_) {
    if (auto* m = dynamic_cast<const SparseMlaTunable*>(op.get())) mla_.push_back(m);
    else if (auto* g = dynamic_cast<const MoeGemmTunable*>(op.get())) moe_.push_back(g);
  }
  copy_table(table, table_);
}

std::string TableTacticChooser::describe() const {
  return fmt::format("tuning table{}{}: {} entries, {} sparse-MLA and {} expert-GEMM op instance(s), max batched "
                     "tokens {}",
                     where_.empty() ? "" : " for ", where_, table_.size(), mla_.size(), moe_.size(),
                     limits_.max_batched_tokens);
}

int TableTacticChooser::sparse_mla(const ops::SparseMlaParams& p) const {
  const int64_t T = p.tokens();
  if (T < 1) return kDefaultTactic;
  for (const SparseMlaTunable* op : mla_) {
    const SparseMlaTuneConfig& c = op->config();
    if (!matches(c, p)) continue;
    Dims dims{T};
    if (!c.extra_key_buckets.empty()) {
      const int64_t width = p.extra->indices.size(1);
      if (width < 1) return kDefaultTactic;
      dims.push_back(width);
    }
    const int id = table_.tactic_for(*op, dims, limits_.max_batched_tokens);
    if (id == kDefaultTactic) return kDefaultTactic;
    // The tuned id was valid at the bucket; the actual T may offer fewer split counts.
    const int index = sparse_mla_op_tactic(p, id);
    if (index == kDefaultTactic) {
      not_offered_.fetch_add(1, std::memory_order_relaxed);
      log_debug("tuning: sparse_mla tactic {} is not offered for T={} ({}); default tactic", id, T,
                op->instance_key());
    }
    return index;
  }
  unmatched_.fetch_add(1, std::memory_order_relaxed);
  log_warn_once(fmt::format("tune-unmatched:sparse_mla:{}.h{}.k{}.p{}{}", formats::kv_format_name(p.main.cache.kind),
                            p.heads(), p.main.indices.defined() ? p.main.indices.size(1) : 0, p.main.cache.page_size,
                            p.extra ? ".x" : ""),
                fmt::format("tuning: no tuned sparse_mla_decode instance has the shape of this call ({} heads, {} "
                            "keys, {} cache, pages of {}{}); using the default tactic",
                            p.heads(), p.main.indices.defined() ? p.main.indices.size(1) : 0,
                            formats::kv_format_name(p.main.cache.kind), p.main.cache.page_size,
                            p.extra ? ", with an extra key list" : ""));
  return kDefaultTactic;
}

int TableTacticChooser::expert_gemm(const ops::ExpertGemmShape& s) const {
  if (s.tokens < 1) return kDefaultTactic;
  for (const MoeGemmTunable* op : moe_) {
    if (!matches(op->config(), s)) continue;
    return table_.tactic_for(*op, Dims{s.tokens}, limits_.max_batched_tokens);
  }
  unmatched_.fetch_add(1, std::memory_order_relaxed);
  log_warn_once(fmt::format("tune-unmatched:expert_gemm:e{}.top{}.n{}.k{}.a{}{}", s.experts, s.topk, s.n, s.k,
                            s.alignment, s.fuse_swiglu ? ".swiglu" : ""),
                fmt::format("tuning: no tuned moe_expert_gemm instance has the shape of this call (E={} top-{} N={} "
                            "K={} alignment {}{}); using the default tactic",
                            s.experts, s.topk, s.n, s.k, s.alignment, s.fuse_swiglu ? ", SwiGLU" : ""));
  return kDefaultTactic;
}

std::shared_ptr<const TableTacticChooser> install_active_tuning(std::vector<std::unique_ptr<TunableOp>> ops,
                                                                const TuningTable& table, const EngineLimits& limits,
                                                                std::string where) {
  auto c = std::make_shared<const TableTacticChooser>(std::move(ops), table, limits, std::move(where));
  ops::install_tactic_chooser(c);
  return c;
}

void clear_active_tuning() { ops::clear_tactic_chooser(); }

}  // namespace dsa::tune
