// Tokenizer: a Hugging Face `tokenizer.json` (byte-level BPE, as shipped with DeepSeek-V3/V4 and
// GLM-5 checkpoints) loaded and run with the same results as the `tokenizers` library.
//
// Pipeline of encode(text), in the order `tokenizers` applies it:
//   1. Invalid UTF-8 in `text` is replaced by U+FFFD per maximal invalid subpart (what Rust's
//      from_utf8_lossy and Python's decode(errors="replace") do); `tokenizers` only ever sees
//      valid strings, so this is the defined behaviour for bytes it could not receive.
//   2. Added tokens (added_tokens.h) are cut out first, leftmost-longest: first those with
//      normalized=false (special tokens), then the others; lstrip/rstrip/single_word honoured.
//      Each becomes its own id and skips the steps below.
//   3. Normalizer: only null (or an empty Sequence) is supported; NFC/NFKC/Lowercase/... are a
//      load error naming the type.
//   4. Pre-tokenizer (pre_tokenizer.h): Split (regex or literal pattern, the five delimiter
//      behaviours, invert), ByteLevel (add_prefix_space, use_regex with GPT-2's pattern; maps
//      bytes to the 256 printable stand-in characters), and Sequence of those. Regexes run on
//      PCRE2 (UTF + UCP + JIT); `tokenizers` uses Oniguruma with Ruby syntax, so `$`/`^` are
//      compiled multiline (Ruby's meaning) and \s, \d, \w are Unicode-aware as there.
//   5. Model (bpe.h): BPE over the characters of each piece: repeatedly merge the adjacent pair of
//      lowest merge rank (leftmost first), as `tokenizers`' priority-queue loop does; results per
//      piece are cached. ignore_merges, unk_token, byte_fallback are honoured.
//   6. Post-processor, only when add_special_tokens: TemplateProcessing (single sequence) adds
//      its special ids; ByteLevel/none add nothing. When the post-processor adds nothing and
//      tokenizer_config.json has add_bos_token: true, the BOS id is prepended (as transformers'
//      LlamaTokenizerFast does for DeepSeek checkpoints).
// decode(ids): tokens of the ids (added tokens first), special ones dropped on request, then the
// ByteLevel decoder (stand-in characters back to bytes, tokens with other characters as their
// raw UTF-8) and a lossy UTF-8 conversion. decode never throws: ids without a token (negative,
// past the vocabulary, holes; a model's vocab_size is often padded past its tokenizer's) decode
// to nothing, as `tokenizers` does. Check ids with token() where a client's input must be refused.
// Files: tokenizer.json and its companions are opened only when they are regular files (a FIFO
// is refused, not waited on), with size limits (core/regular_file.h); token ids must stay below
// 2^24 and near the token count (a huge id in a small file cannot size the id table).
// bos_id/eos_id: bos_token/eos_token of tokenizer_config.json beside tokenizer.json (string or
// {"content": ...}), else bos_token_id/eos_token_id of generation_config.json (first of a list).
// vocab_size(): largest id + 1 (model vocabulary and added tokens).
// Thread safety: a loaded Tokenizer is immutable apart from an internal mutex-guarded cache;
// encode/decode may be called from several threads.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

namespace dsa::tok {
struct TokenizerImpl;
}

namespace dsa {

// False when dsa was built without PCRE2: load() then throws and the tokenizer tests skip.
bool tokenizer_available();

class Tokenizer {
 public:
  // path_or_dir: a tokenizer.json file, or a directory holding one (a checkpoint directory).
  static std::unique_ptr<Tokenizer> load(const std::string& path_or_dir);
  // tokenizer.json text alone (no companion files); `label` names it in errors.
  static std::unique_ptr<Tokenizer> from_json_text(std::string_view json_text, const std::string& label);
  ~Tokenizer();

  std::vector<int32_t> encode(std::string_view text, bool add_special_tokens = false) const;
  std::string decode(const std::vector<int32_t>& ids, bool skip_special_tokens = false) const;

  int32_t token_id(std::string_view token) const;  // -1 if none
  std::optional<std::string> token(int32_t id) const;
  bool is_special(int32_t id) const;
  int64_t vocab_size() const;
  std::optional<int32_t> bos_id() const;
  std::optional<int32_t> eos_id() const;

 private:
  explicit Tokenizer(std::unique_ptr<tok::TokenizerImpl> impl);
  static std::unique_ptr<Tokenizer> from_json(const nlohmann::json& j, const std::string& label,
                                              const std::string& companion_dir);
  std::unique_ptr<tok::TokenizerImpl> impl_;
};

}  // namespace dsa
