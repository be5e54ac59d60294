#include "dsa/engine/rank_step.h"

#include <algorithm>
#include <cstring>

#include "dsa/core/error.h"

namespace dsa::engine {

namespace {

constexpr uint64_t kMagic = 0x7065745374736473;  // "dsaStep" + version byte below
constexpr uint64_t kVersion = 1;

class Out {
 public:
  void u64(uint64_t v) { raw(&v, sizeof v); }
  void i64(int64_t v) { raw(&v, sizeof v); }
  void raw(const void* p, size_t n) { s_.append(static_cast<const char*>(p), n); }
  void tensor(const Tensor& t) {
    u64(t.defined() ? 1 : 0);
    if (!t.defined()) return;
    DSA_CHECK(!t.device().is_cuda() && t.is_contiguous(), "rank step: metadata tensor {} must be contiguous on the host",
              t.str());
    u64(static_cast<uint64_t>(t.dtype()));
    u64(static_cast<uint64_t>(t.dim()));
    for (int64_t d : t.shape()) i64(d);
    raw(t.raw(), t.nbytes());
  }
  std::string take() { return std::move(s_); }

 private:
  std::string s_;
};

class In {
 public:
  explicit In(const std::string& s) : s_(s) {}
  uint64_t u64(const char* what) {
    uint64_t v;
    raw(&v, sizeof v, what);
    return v;
  }
  int64_t i64(const char* what) {
    int64_t v;
    raw(&v, sizeof v, what);
    return v;
  }
  void raw(void* p, size_t n, const char* what) {
    DSA_CHECK(n <= s_.size() - off_, "rank step: malformed bytes: {} needs {} bytes at offset {}, {} left", what, n,
              off_, s_.size() - off_);
    std::memcpy(p, s_.data() + off_, n);
    off_ += n;
  }
  // A count of items of `item_bytes` each that the remaining bytes can hold at all.
  uint64_t count(const char* what, size_t item_bytes) {
    const uint64_t n = u64(what);
    DSA_CHECK(n <= (s_.size() - off_) / std::max<size_t>(item_bytes, 1), "rank step: malformed bytes: {} count {}",
              what, n);
    return n;
  }
  Tensor tensor(const char* what) {
    if (u64(what) == 0) return Tensor();
    const uint64_t dt = u64(what);
    DSA_CHECK(dt == static_cast<uint64_t>(DType::I32) || dt == static_cast<uint64_t>(DType::I64),
              "rank step: malformed bytes: {} has dtype code {}", what, dt);
    const uint64_t dims = u64(what);
    DSA_CHECK(dims >= 1 && dims <= 4, "rank step: malformed bytes: {} has {} dims", what, dims);
    Shape shape;
    int64_t numel = 1;
    for (uint64_t i = 0; i < dims; ++i) {
      const int64_t d = i64(what);
      DSA_CHECK(d >= 0 && d <= (int64_t{1} << 40), "rank step: malformed bytes: {} dim {} is {}", what, i, d);
      shape.push_back(d);
      numel *= d;
      DSA_CHECK(numel <= (int64_t{1} << 40), "rank step: malformed bytes: {} is too large", what);
    }
    const size_t esz = dt == static_cast<uint64_t>(DType::I32) ? 4 : 8;
    DSA_CHECK(static_cast<uint64_t>(numel) * esz <= s_.size() - off_,
              "rank step: malformed bytes: {} needs {} bytes, {} left", what, numel * esz, s_.size() - off_);
    Tensor t = Tensor::empty(shape, static_cast<DType>(dt));
    raw(t.raw(), t.nbytes(), what);
    return t;
  }
  bool done() const { return off_ == s_.size(); }

 private:
  const std::string& s_;
  size_t off_ = 0;
};

}  // namespace

std::string encode_rank_step(const RankStep& step) {
  const kv::BatchMetadata& m = step.meta;
  Out o;
  o.u64(kMagic);
  o.u64(kVersion);
  o.u64(m.request_ids.size());
  for (kv::RequestId id : m.request_ids) o.i64(id);
  o.i64(m.max_seq_len);
  o.i64(m.index_len);
  for (const Tensor* t : {&m.token_ids, &m.token_req, &m.positions, &m.query_start, &m.cached_lens, &m.seq_lens,
                          &m.state_slots})
    o.tensor(*t);
  o.u64(m.groups.size());
  for (const kv::GroupMetadata& g : m.groups) {
    o.i64(g.ratio);
    o.i64(g.page_size);
    o.i64(g.window);
    o.i64(g.num_pages);
    for (const Tensor* t : {&g.block_table, &g.slots, &g.entry_tokens, &g.entry_slots, &g.entry_start}) o.tensor(*t);
  }
  o.u64(step.rows.size());
  for (const RowRequest& r : step.rows) {
    o.i64(r.token);
    o.raw(&r.sampling, sizeof r.sampling);
    o.u64(r.want_logits ? 1 : 0);
  }
  return o.take();
}

RankStep decode_rank_step(const std::string& bytes) {
  In in(bytes);
  DSA_CHECK(in.u64("magic") == kMagic, "rank step: malformed bytes: not a dsa rank step (bad magic)");
  const uint64_t version = in.u64("version");
  DSA_CHECK(version == kVersion, "rank step: version {} where this build reads {} (mismatched builds)", version,
            kVersion);
  RankStep s;
  kv::BatchMetadata& m = s.meta;
  const uint64_t R = in.count("request ids", 8);
  for (uint64_t i = 0; i < R; ++i) m.request_ids.push_back(in.i64("request id"));
  m.max_seq_len = in.i64("max_seq_len");
  m.index_len = in.i64("index_len");
  m.token_ids = in.tensor("token_ids");
  m.token_req = in.tensor("token_req");
  m.positions = in.tensor("positions");
  m.query_start = in.tensor("query_start");
  m.cached_lens = in.tensor("cached_lens");
  m.seq_lens = in.tensor("seq_lens");
  m.state_slots = in.tensor("state_slots");
  const uint64_t G = in.count("cache groups", 32);
  for (uint64_t i = 0; i < G; ++i) {
    kv::GroupMetadata g;
    g.ratio = static_cast<int>(in.i64("group ratio"));
    g.page_size = static_cast<int>(in.i64("group page_size"));
    g.window = static_cast<int>(in.i64("group window"));
    g.num_pages = in.i64("group num_pages");
    g.block_table = in.tensor("block_table");
    g.slots = in.tensor("slots");
    g.entry_tokens = in.tensor("entry_tokens");
    g.entry_slots = in.tensor("entry_slots");
    g.entry_start = in.tensor("entry_start");
    m.groups.push_back(std::move(g));
  }
  const uint64_t rows = in.count("rows", 8 + sizeof(ops::SamplingRow) + 8);
  for (uint64_t i = 0; i < rows; ++i) {
    RowRequest r;
    r.token = in.i64("row token");
    in.raw(&r.sampling, sizeof r.sampling, "row sampling");
    r.want_logits = in.u64("row want_logits") != 0;
    s.rows.push_back(r);
  }
  DSA_CHECK(in.done(), "rank step: malformed bytes: {} bytes after the last row", bytes.size());
  return s;
}

}  // namespace dsa::engine
