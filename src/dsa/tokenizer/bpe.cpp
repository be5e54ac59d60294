#include "dsa/tokenizer/bpe.h"

#include <functional>
#include <limits>
#include <queue>

#include "dsa/core/error.h"
#include "dsa/tokenizer/utf8.h"

namespace dsa::tok {
namespace {

constexpr size_t kCacheMaxEntries = 1 << 16;  // cleared when full
constexpr size_t kCacheMaxPieceBytes = 256;   // longer pieces are not cached

uint64_t pair_key(int32_t a, int32_t b) { return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b); }

std::string opt_string(const nlohmann::json& m, const char* key) {
  if (!m.contains(key) || m[key].is_null()) return "";
  DSA_CHECK(m[key].is_string(), "tokenizer: model.{}: expected a string or null", key);
  return m[key].get<std::string>();
}

}  // namespace

Bpe::Bpe(const nlohmann::json& m) {
  DSA_CHECK(m.is_object(), "tokenizer: model: expected an object");
  std::string type = m.value("type", std::string("BPE"));
  DSA_CHECK(type == "BPE", "tokenizer: model.type: unsupported model type \"{}\" (only BPE is supported)", type);
  DSA_CHECK(m.contains("vocab") && m["vocab"].is_object(), "tokenizer: model.vocab: missing or not an object");
  DSA_CHECK(!m.contains("dropout") || m["dropout"].is_null() || m["dropout"] == 0.0,
            "tokenizer: model.dropout: BPE dropout is not supported (got {})", m["dropout"].dump());
  for (const auto& [tok, id] : m["vocab"].items()) {
    DSA_CHECK(id.is_number_integer() && id.get<int64_t>() >= 0 && id.get<int64_t>() < std::numeric_limits<int32_t>::max(),
              "tokenizer: model.vocab[\"{}\"]: id must be a non-negative integer, got {}", tok, id.dump());
    vocab_.emplace(tok, id.get<int32_t>());
  }
  prefix_ = opt_string(m, "continuing_subword_prefix");
  suffix_ = opt_string(m, "end_of_word_suffix");
  fuse_unk_ = m.value("fuse_unk", false);
  byte_fallback_ = m.value("byte_fallback", false);
  ignore_merges_ = m.value("ignore_merges", false);
  std::string unk = opt_string(m, "unk_token");
  if (!unk.empty()) {
    auto it = vocab_.find(unk);
    DSA_CHECK(it != vocab_.end(), "tokenizer: model.unk_token: \"{}\" is not in the vocabulary", unk);
    unk_id_ = it->second;
  }

  DSA_CHECK(m.contains("merges") && m["merges"].is_array(), "tokenizer: model.merges: missing or not an array");
  const auto& merges = m["merges"];
  merges_.reserve(merges.size());
  for (size_t r = 0; r < merges.size(); ++r) {
    const auto& e = merges[r];
    std::string a, b;
    if (e.is_string()) {  // "a b" (the older format; tokens never contain a space there)
      const std::string& s = e.get_ref<const std::string&>();
      size_t sp = s.find(' ');
      DSA_CHECK(sp != std::string::npos && s.find(' ', sp + 1) == std::string::npos,
                "tokenizer: model.merges[{}]: bad merge \"{}\" (expected two tokens separated by one space)", r, s);
      a = s.substr(0, sp), b = s.substr(sp + 1);
    } else if (e.is_array() && e.size() == 2 && e[0].is_string() && e[1].is_string()) {  // ["a", "b"]
      a = e[0], b = e[1];
    } else {
      fail("tokenizer: model.merges[{}]: bad merge {} (expected \"a b\" or [\"a\", \"b\"])", r, e.dump());
    }
    auto ia = vocab_.find(a), ib = vocab_.find(b);
    DSA_CHECK(ia != vocab_.end(), "tokenizer: model.merges[{}]: token \"{}\" is not in the vocabulary", r, a);
    DSA_CHECK(ib != vocab_.end(), "tokenizer: model.merges[{}]: token \"{}\" is not in the vocabulary", r, b);
    std::string merged = a + (prefix_.empty() || b.rfind(prefix_, 0) != 0 ? b : b.substr(prefix_.size()));
    auto im = vocab_.find(merged);
    DSA_CHECK(im != vocab_.end(), "tokenizer: model.merges[{}]: merged token \"{}\" is not in the vocabulary", r, merged);
    // A repeated pair keeps its first (lowest) rank.
    merges_.emplace(pair_key(ia->second, ib->second), std::make_pair(static_cast<int32_t>(r), im->second));
  }
}

void Bpe::merge_word(const std::string& piece, std::vector<int32_t>& out) const {
  // Initial symbols: one per character (with the subword prefix / word suffix where configured).
  std::vector<int32_t> sym;
  std::optional<int32_t> pending_unk;  // fuse_unk: consecutive unknowns become one
  size_t i = 0;
  while (i < piece.size()) {
    size_t n = utf8_char_len(piece, i);
    std::string ch = piece.substr(i, n);
    bool first = i == 0, last = i + n == piece.size();
    if (!first && !prefix_.empty()) ch = prefix_ + ch;
    if (last && !suffix_.empty()) ch += suffix_;
    i += n;
    auto it = vocab_.find(ch);
    if (it != vocab_.end()) {
      if (pending_unk) sym.push_back(*pending_unk), pending_unk.reset();
      sym.push_back(it->second);
      continue;
    }
    if (byte_fallback_) {
      std::vector<int32_t> bytes;
      bool all = true;
      for (size_t k = i - n; k < i; ++k) {
        auto ib = vocab_.find(fmt::format("<0x{:02X}>", static_cast<unsigned char>(piece[k])));
        if (ib == vocab_.end()) {
          all = false;
          break;
        }
        bytes.push_back(ib->second);
      }
      if (all) {
        if (pending_unk) sym.push_back(*pending_unk), pending_unk.reset();
        sym.insert(sym.end(), bytes.begin(), bytes.end());
        continue;
      }
    }
    if (unk_id_) {
      if (!fuse_unk_) sym.push_back(*unk_id_);
      else pending_unk = *unk_id_;
    }
    // Without an unk token, `tokenizers` drops the character; so do we.
  }
  if (pending_unk) sym.push_back(*pending_unk);

  // Merge loop: lowest rank first, leftmost among equal ranks, one merge at a time. Symbols form
  // a doubly linked list over their first positions; a min-heap holds candidate pairs keyed by
  // (rank, left position), and an entry is stale (skipped) when either side changed since it was
  // pushed. O(n log n) for long pieces (a CJK run can be one piece of thousands of characters).
  const size_t n = sym.size();
  if (n > 1) {
    std::vector<size_t> prev(n), next(n);
    std::vector<uint8_t> alive(n, 1);
    for (size_t k = 0; k < n; ++k) prev[k] = k - 1, next[k] = k + 1;  // prev[0] wraps: unused
    struct Cand {
      int32_t rank;
      size_t pos;
      int32_t left, right;
      bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
    };
    std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
    auto push = [&](size_t k) {
      if (k >= n || next[k] >= n) return;
      auto it = merges_.find(pair_key(sym[k], sym[next[k]]));
      if (it != merges_.end()) heap.push({it->second.first, k, sym[k], sym[next[k]]});
    };
    for (size_t k = 0; k + 1 < n; ++k) push(k);
    while (!heap.empty()) {
      Cand c = heap.top();
      heap.pop();
      size_t k = c.pos;
      if (!alive[k] || next[k] >= n || sym[k] != c.left || sym[next[k]] != c.right) continue;
      size_t r = next[k];
      sym[k] = merges_.at(pair_key(c.left, c.right)).second;
      alive[r] = 0;
      next[k] = next[r];
      if (next[k] < n) prev[next[k]] = k;
      if (k > 0) push(prev[k]);
      push(k);
    }
    for (size_t k = 0; k < n; k = next[k]) out.push_back(sym[k]);
    return;
  }
  out.insert(out.end(), sym.begin(), sym.end());
}

void Bpe::encode_piece(const std::string& piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    auto it = vocab_.find(piece);
    if (it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  bool cacheable = piece.size() <= kCacheMaxPieceBytes;
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    auto it = cache_.find(piece);
    if (it != cache_.end()) {
      out.insert(out.end(), it->second.begin(), it->second.end());
      return;
    }
  }
  size_t start = out.size();
  merge_word(piece, out);
  if (cacheable) {
    std::lock_guard<std::mutex> lock(cache_mu_);
    if (cache_.size() >= kCacheMaxEntries) cache_.clear();
    cache_.emplace(piece, std::vector<int32_t>(out.begin() + static_cast<std::ptrdiff_t>(start), out.end()));
  }
}

}  // namespace dsa::tok
