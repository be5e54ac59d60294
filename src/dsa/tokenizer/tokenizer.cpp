#include "dsa/tokenizer/tokenizer.h"

#include <filesystem>
#include <fstream>
#include <sstream>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "dsa/core/error.h"
#include "dsa/core/regular_file.h"
#include "dsa/tokenizer/added_tokens.h"
#include "dsa/tokenizer/bpe.h"
#include "dsa/tokenizer/byte_level.h"
#include "dsa/tokenizer/pre_tokenizer.h"
#include "dsa/tokenizer/regex.h"
#include "dsa/tokenizer/utf8.h"

namespace fs = std::filesystem;

namespace dsa::tok {

struct TokenizerImpl {
  std::unique_ptr<Bpe> model;
  AddedTokens added;
  std::unique_ptr<PreTokenizer> pre;
  bool byte_level_decoder = false;
  std::vector<std::string> id_to_token;  // "" for holes
  std::vector<uint8_t> special;          // per id
  std::unordered_map<std::string, int32_t> added_ids;
  std::vector<int32_t> prefix_ids, suffix_ids;  // post-processor (single sequence)
  std::optional<int32_t> bos, eos;
};

namespace {

nlohmann::json parse_json(const std::string& text, const std::string& where, const char* what) {
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    fail("tokenizer: {} {} is not valid JSON: {}", what, where, e.what());
  }
}

// Regular files only (a FIFO cannot block the load), bounded in size.
nlohmann::json read_json(const fs::path& p, const char* what, uint64_t max_bytes) {
  std::string text;
  try {
    text = read_regular_file(p.string(), max_bytes);
  } catch (const Error& e) {
    fail("tokenizer: cannot read {} {}", what, e.what());
  }
  return parse_json(text, p.string(), what);
}

// Largest token id accepted: ids index a table, so a huge id in a small file must not size it.
// Real vocabularies are dense (DeepSeek ~129k ids, GLM ~155k); holes are allowed up to a slack.
constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;
constexpr int64_t kIdSlack = 65536;

// TemplateProcessing's "single" template -> ids before and after the sequence.
void parse_post_processor(const nlohmann::json& j, const std::string& where, TokenizerImpl& t) {
  if (j.is_null()) return;
  DSA_CHECK(j.is_object() && j.contains("type") && j["type"].is_string(), "tokenizer: {}: expected an object with a \"type\"", where);
  std::string type = j["type"];
  if (type == "ByteLevel") return;  // offsets only
  if (type == "Sequence") {
    DSA_CHECK(j.contains("processors") && j["processors"].is_array(), "tokenizer: {}.processors: missing or not an array", where);
    for (size_t i = 0; i < j["processors"].size(); ++i)
      parse_post_processor(j["processors"][i], fmt::format("{}.processors[{}]", where, i), t);
    return;
  }
  DSA_CHECK(type == "TemplateProcessing",
            "tokenizer: {}: unsupported post-processor type \"{}\" (supported: ByteLevel, TemplateProcessing, Sequence)", where, type);
  DSA_CHECK(j.contains("single") && j["single"].is_array(), "tokenizer: {}.single: missing or not an array", where);
  const auto& specials = j.value("special_tokens", nlohmann::json::object());
  bool seen_seq = false;
  for (const auto& piece : j["single"]) {
    if (piece.contains("Sequence")) {
      seen_seq = true;
      continue;
    }
    DSA_CHECK(piece.contains("SpecialToken") && piece["SpecialToken"].contains("id"), "tokenizer: {}.single: bad piece {}", where, piece.dump());
    std::string name = piece["SpecialToken"]["id"];
    DSA_CHECK(specials.contains(name) && specials[name].contains("ids"), "tokenizer: {}.special_tokens: no entry \"{}\"", where, name);
    for (const auto& id : specials[name]["ids"]) (seen_seq ? t.suffix_ids : t.prefix_ids).push_back(id.get<int32_t>());
  }
}

// bos/eos from tokenizer_config.json (token strings) or generation_config.json (ids).
void read_special_configs(const fs::path& dir, TokenizerImpl& t, bool post_adds_nothing) {
  auto lookup = [&](const nlohmann::json& v) -> std::optional<int32_t> {
    std::string s;
    if (v.is_string()) s = v.get<std::string>();
    else if (v.is_object() && v.contains("content") && v["content"].is_string()) s = v["content"];
    else return std::nullopt;
    auto it = t.added_ids.find(s);
    if (it != t.added_ids.end()) return it->second;
    auto iv = t.model->vocab().find(s);
    if (iv != t.model->vocab().end()) return iv->second;
    return std::nullopt;
  };
  bool add_bos = false;
  fs::path tc = dir / "tokenizer_config.json";
  if (path_kind(tc.string()) != PathKind::Missing) {
    auto j = read_json(tc, "tokenizer config", kMaxConfigFileBytes);
    if (j.contains("bos_token")) t.bos = lookup(j["bos_token"]);
    if (j.contains("eos_token")) t.eos = lookup(j["eos_token"]);
    add_bos = j.value("add_bos_token", false) == true;
  }
  fs::path gc = dir / "generation_config.json";
  if (path_kind(gc.string()) != PathKind::Missing) {
    auto j = read_json(gc, "generation config", kMaxConfigFileBytes);
    auto first_id = [](const nlohmann::json& v) -> std::optional<int32_t> {
      if (v.is_number_integer()) return v.get<int32_t>();
      if (v.is_array() && !v.empty() && v[0].is_number_integer()) return v[0].get<int32_t>();
      return std::nullopt;
    };
    if (!t.bos && j.contains("bos_token_id")) t.bos = first_id(j["bos_token_id"]);
    if (!t.eos && j.contains("eos_token_id")) t.eos = first_id(j["eos_token_id"]);
  }
  if (add_bos && post_adds_nothing && t.bos) t.prefix_ids.push_back(*t.bos);
}

}  // namespace
}  // namespace dsa::tok

namespace dsa {

bool tokenizer_available() { return tok::regex_available(); }

Tokenizer::Tokenizer(std::unique_ptr<tok::TokenizerImpl> impl) : impl_(std::move(impl)) {}
Tokenizer::~Tokenizer() = default;

std::unique_ptr<Tokenizer> Tokenizer::load(const std::string& path_or_dir) {
  DSA_CHECK(tokenizer_available(), "tokenizer: dsa was built without PCRE2 (install libpcre2-dev and reconfigure); cannot load {}",
            path_or_dir);
  fs::path p(path_or_dir);
  try {
    if (path_kind(p.string()) == PathKind::Directory) p /= "tokenizer.json";
    DSA_CHECK(path_kind(p.string()) != PathKind::Missing, "tokenizer: {} does not exist", p.string());
  } catch (const Error& e) {
    if (std::string_view(e.what()).rfind("tokenizer:", 0) == 0) throw;
    fail("tokenizer: {}", e.what());  // a symlink loop or an unreadable path
  }
  auto j = tok::read_json(p, "tokenizer file", kMaxTokenizerFileBytes);
  return from_json(j, p.string(), p.parent_path().string());
}

std::unique_ptr<Tokenizer> Tokenizer::from_json_text(std::string_view json_text, const std::string& label) {
  DSA_CHECK(tokenizer_available(), "tokenizer: dsa was built without PCRE2 (install libpcre2-dev and reconfigure); cannot load {}",
            label);
  return from_json(tok::parse_json(std::string(json_text), label, "tokenizer file"), label, "");
}

std::unique_ptr<Tokenizer> Tokenizer::from_json(const nlohmann::json& j, const std::string& label,
                                                const std::string& companion_dir) {
  using namespace tok;
  DSA_CHECK(j.is_object(), "tokenizer: {}: expected a JSON object", label);
  auto t = std::make_unique<TokenizerImpl>();
  try {
    DSA_CHECK(j.contains("model"), "tokenizer: model: missing");
    t->model = std::make_unique<Bpe>(j["model"]);
    const auto norm = j.value("normalizer", nlohmann::json());
    bool trivial = norm.is_null() || (norm.is_object() && norm.value("type", "") == "Sequence" &&
                                      norm.contains("normalizers") && norm["normalizers"].empty());
    if (!trivial)
      fail("tokenizer: normalizer: unsupported normalizer {} (only null is supported)",
           norm.is_object() && norm.contains("type") && norm["type"].is_string()
               ? norm["type"].get<std::string>()
               : norm.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).substr(0, 80));
    t->pre = make_pre_tokenizer(j.value("pre_tokenizer", nlohmann::json()), "pre_tokenizer");
    t->added = AddedTokens(j.value("added_tokens", nlohmann::json()));
    const auto dec = j.value("decoder", nlohmann::json());
    if (!dec.is_null()) {
      DSA_CHECK(dec.is_object(), "tokenizer: decoder: expected an object or null");
      std::string type = dec.value("type", std::string("?"));
      DSA_CHECK(type == "ByteLevel", "tokenizer: decoder.type: unsupported decoder type \"{}\" (only ByteLevel)", type);
      t->byte_level_decoder = true;
    }
    parse_post_processor(j.value("post_processor", nlohmann::json()), "post_processor", *t);
  } catch (const Error& e) {
    fail("{} (in {})", e.what(), label);
  } catch (const nlohmann::json::exception& e) {  // a field of an unexpected JSON type
    fail("tokenizer: unexpected structure: {} (in {})", e.what(), label);
  }

  int64_t max_id = -1, count = 0;
  for (const auto& [s, id] : t->model->vocab()) max_id = std::max<int64_t>(max_id, id), ++count;
  for (const auto& a : t->added.tokens()) max_id = std::max<int64_t>(max_id, a.id), ++count;
  DSA_CHECK(max_id <= kMaxTokenId && max_id < 2 * count + kIdSlack,
            "tokenizer: {}: largest id {} for {} tokens: ids must stay below {} and near the token count (holes up to "
            "{} + the count)",
            label, max_id, count, kMaxTokenId + 1, kIdSlack);
  t->id_to_token.assign(static_cast<size_t>(max_id + 1), std::string());
  t->special.assign(static_cast<size_t>(max_id + 1), 0);
  for (const auto& [s, id] : t->model->vocab()) t->id_to_token[id] = s;
  for (const auto& a : t->added.tokens()) {
    t->id_to_token[a.id] = a.content;
    t->special[a.id] = a.special;
    t->added_ids[a.content] = a.id;
  }
  bool post_adds_nothing = t->prefix_ids.empty() && t->suffix_ids.empty();
  if (!companion_dir.empty()) {
    try {
      read_special_configs(companion_dir, *t, post_adds_nothing);
    } catch (const nlohmann::json::exception& e) {
      fail("tokenizer: unexpected structure in tokenizer_config.json or generation_config.json of {}: {}",
           companion_dir, e.what());
    }
  }
  for (int32_t id : t->prefix_ids) DSA_CHECK(id >= 0 && id <= max_id, "tokenizer: post_processor: id {} out of range", id);
  for (int32_t id : t->suffix_ids) DSA_CHECK(id >= 0 && id <= max_id, "tokenizer: post_processor: id {} out of range", id);
  return std::unique_ptr<Tokenizer>(new Tokenizer(std::move(t)));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special_tokens) const {
  const auto& t = *impl_;
  std::string valid = tok::utf8_lossy(text);
  std::vector<int32_t> ids;
  if (add_special_tokens) ids = t.prefix_ids;
  std::vector<std::string> pieces;
  for (const auto& seg : t.added.split(valid)) {
    if (seg.id >= 0) {
      ids.push_back(seg.id);
      continue;
    }
    pieces.assign(1, std::string(seg.text));
    if (t.pre) t.pre->apply(pieces);
    for (const auto& p : pieces) t.model->encode_piece(p, ids);
  }
  if (add_special_tokens) ids.insert(ids.end(), t.suffix_ids.begin(), t.suffix_ids.end());
  return ids;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const {
  const auto& t = *impl_;
  std::string bytes;
  bool first = true;
  for (int32_t id : ids) {
    // Ids without a token (the model's vocabulary is often padded past the tokenizer's) decode
    // to nothing, as in `tokenizers`: decoding never fails on a model-produced id.
    if (id < 0 || static_cast<size_t>(id) >= t.id_to_token.size() || t.id_to_token[id].empty()) continue;
    if (skip_special_tokens && t.special[id]) continue;
    const std::string& tok_str = t.id_to_token[id];
    if (!t.byte_level_decoder) {  // no decoder: tokens joined by spaces, as `tokenizers` does
      if (!first) bytes.push_back(' ');
      bytes += tok_str;
      first = false;
      continue;
    }
    // Stand-in characters back to bytes; a token with any other character stays as it is.
    std::string raw;
    bool ok = true;
    for (size_t i = 0; i < tok_str.size(); i += tok::utf8_char_len(tok_str, i)) {
      auto b = tok::char_to_byte(tok::utf8_decode_at(tok_str, i));
      if (!b) {
        ok = false;
        break;
      }
      raw.push_back(static_cast<char>(*b));
    }
    bytes += ok ? raw : tok_str;
  }
  return tok::utf8_lossy(bytes);
}

int32_t Tokenizer::token_id(std::string_view token) const {
  std::string s(token);
  auto it = impl_->added_ids.find(s);
  if (it != impl_->added_ids.end()) return it->second;
  auto iv = impl_->model->vocab().find(s);
  return iv == impl_->model->vocab().end() ? -1 : iv->second;
}

std::optional<std::string> Tokenizer::token(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= impl_->id_to_token.size() || impl_->id_to_token[id].empty()) return std::nullopt;
  return impl_->id_to_token[id];
}

bool Tokenizer::is_special(int32_t id) const {
  return id >= 0 && static_cast<size_t>(id) < impl_->special.size() && impl_->special[id];
}

int64_t Tokenizer::vocab_size() const { return static_cast<int64_t>(impl_->id_to_token.size()); }
std::optional<int32_t> Tokenizer::bos_id() const { return impl_->bos; }
std::optional<int32_t> Tokenizer::eos_id() const { return impl_->eos; }

}  // namespace dsa
