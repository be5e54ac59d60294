#include "dsa/tokenizer/pre_tokenizer.h"

#include "dsa/core/error.h"
#include "dsa/tokenizer/byte_level.h"

namespace dsa::tok {
namespace {

// GPT-2's pattern, which ByteLevel(use_regex=true) splits with (Isolated).
constexpr const char* kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

struct Span {
  size_t b, e;
  bool delim;
};

}  // namespace

void SplitPreTokenizer::split(const std::string& s, std::vector<std::string>& out) const {
  // Cover s with alternating non-delimiter and delimiter spans (as `tokenizers`' find_matches).
  std::vector<Span> spans;
  size_t prev = 0;
  for (auto [b, e] : re_->find_all(s)) {
    if (b != prev) spans.push_back({prev, b, false});
    spans.push_back({b, e, true});
    prev = e;
  }
  if (prev != s.size()) spans.push_back({prev, s.size(), false});
  if (invert_)
    for (auto& sp : spans) sp.delim = !sp.delim;

  std::vector<Span> kept;  // `delim` now means "drop"
  switch (behavior_) {
    case SplitBehavior::Isolated:
      for (auto sp : spans) kept.push_back({sp.b, sp.e, false});
      break;
    case SplitBehavior::Removed:
      kept = spans;
      break;
    case SplitBehavior::Contiguous: {
      bool prev_delim = false;
      for (auto sp : spans) {
        if (sp.delim && prev_delim && !kept.empty())
          kept.back().e = sp.e;
        else
          kept.push_back({sp.b, sp.e, false});
        prev_delim = sp.delim;
      }
      break;
    }
    case SplitBehavior::MergedWithPrevious: {
      bool prev_delim = false;
      for (auto sp : spans) {
        if (sp.delim && !prev_delim && !kept.empty())
          kept.back().e = sp.e;
        else
          kept.push_back({sp.b, sp.e, false});
        prev_delim = sp.delim;
      }
      break;
    }
    case SplitBehavior::MergedWithNext: {
      // Walk right to left: a delimiter glues onto the (non-delimiter) span after it.
      bool prev_delim = false;
      std::vector<Span> rev;
      for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
        if (it->delim && !prev_delim && !rev.empty())
          rev.back().b = it->b;
        else
          rev.push_back({it->b, it->e, false});
        prev_delim = it->delim;
      }
      kept.assign(rev.rbegin(), rev.rend());
      break;
    }
  }
  for (const auto& sp : kept)
    if (!sp.delim && sp.e > sp.b) out.emplace_back(s.substr(sp.b, sp.e - sp.b));
}

void SplitPreTokenizer::apply(std::vector<std::string>& pieces) const {
  std::vector<std::string> out;
  out.reserve(pieces.size());
  for (const auto& p : pieces) split(p, out);
  pieces = std::move(out);
}

ByteLevelPreTokenizer::ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex)
    : add_prefix_space_(add_prefix_space) {
  if (use_regex)
    gpt2_ = std::make_unique<SplitPreTokenizer>(std::make_unique<Regex>(kGpt2Pattern, false, "ByteLevel use_regex"),
                                                SplitBehavior::Isolated, false);
}

void ByteLevelPreTokenizer::apply(std::vector<std::string>& pieces) const {
  std::vector<std::string> out;
  out.reserve(pieces.size());
  for (auto& p : pieces) {
    if (add_prefix_space_ && (p.empty() || p[0] != ' ')) p.insert(p.begin(), ' ');
    if (gpt2_)
      gpt2_->split(p, out);
    else if (!p.empty())
      out.push_back(std::move(p));
  }
  for (auto& p : out) p = bytes_to_chars(p);
  pieces = std::move(out);
}

std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& j, const std::string& where) {
  if (j.is_null()) return nullptr;
  DSA_CHECK(j.is_object() && j.contains("type") && j["type"].is_string(), "tokenizer: {}: expected an object with a \"type\"", where);
  const std::string type = j["type"];
  if (type == "Sequence") {
    DSA_CHECK(j.contains("pretokenizers") && j["pretokenizers"].is_array(), "tokenizer: {}.pretokenizers: missing or not an array", where);
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (size_t i = 0; i < j["pretokenizers"].size(); ++i) {
      auto s = make_pre_tokenizer(j["pretokenizers"][i], fmt::format("{}.pretokenizers[{}]", where, i));
      if (s) steps.push_back(std::move(s));
    }
    return std::make_unique<SequencePreTokenizer>(std::move(steps));
  }
  if (type == "ByteLevel") {
    bool aps = j.value("add_prefix_space", true);
    bool use_regex = j.value("use_regex", true);
    return std::make_unique<ByteLevelPreTokenizer>(aps, use_regex);
  }
  if (type == "Split") {
    DSA_CHECK(j.contains("pattern") && j["pattern"].is_object(), "tokenizer: {}.pattern: missing or not an object", where);
    const auto& pat = j["pattern"];
    bool literal;
    std::string text;
    if (pat.contains("Regex") && pat["Regex"].is_string()) {
      literal = false, text = pat["Regex"];
    } else if (pat.contains("String") && pat["String"].is_string()) {
      literal = true, text = pat["String"];
    } else {
      fail("tokenizer: {}.pattern: expected {{\"Regex\": ...}} or {{\"String\": ...}}, got {}", where, pat.dump());
    }
    std::string b = j.value("behavior", std::string("Isolated"));
    SplitBehavior behavior;
    if (b == "Removed") behavior = SplitBehavior::Removed;
    else if (b == "Isolated") behavior = SplitBehavior::Isolated;
    else if (b == "MergedWithPrevious") behavior = SplitBehavior::MergedWithPrevious;
    else if (b == "MergedWithNext") behavior = SplitBehavior::MergedWithNext;
    else if (b == "Contiguous") behavior = SplitBehavior::Contiguous;
    else fail("tokenizer: {}.behavior: unknown split behavior \"{}\"", where, b);
    return std::make_unique<SplitPreTokenizer>(std::make_unique<Regex>(text, literal, where + ".pattern"), behavior,
                                               j.value("invert", false));
  }
  fail("tokenizer: {}: unsupported pre-tokenizer type \"{}\" (supported: Sequence, Split, ByteLevel)", where, type);
}

}  // namespace dsa::tok
