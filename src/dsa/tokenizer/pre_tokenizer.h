// Pre-tokenizers of tokenizer.json: they cut a piece of text into smaller pieces (BPE never
// merges across pieces). Supported: Split, ByteLevel and Sequence of those, with the semantics of
// `tokenizers` (each step is applied to every piece the previous steps produced; empty pieces are
// dropped).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "dsa/tokenizer/regex.h"

namespace dsa::tok {

enum class SplitBehavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Replaces `pieces` by the pieces this step cuts them into.
  virtual void apply(std::vector<std::string>& pieces) const = 0;
  // True when this step maps bytes to the byte-level alphabet (the model then sees stand-ins).
  virtual bool byte_level() const { return false; }
};

// Split: the pattern's matches are delimiters (with invert, the non-matches are), treated by
// `behavior`: Removed drops them, Isolated keeps them as their own pieces, MergedWithPrevious /
// MergedWithNext glue them to the piece before / after, Contiguous joins adjacent delimiters.
class SplitPreTokenizer : public PreTokenizer {
 public:
  SplitPreTokenizer(std::unique_ptr<Regex> re, SplitBehavior behavior, bool invert)
      : re_(std::move(re)), behavior_(behavior), invert_(invert) {}
  void apply(std::vector<std::string>& pieces) const override;
  // The cut of one piece (exposed for tests).
  void split(const std::string& s, std::vector<std::string>& out) const;

 private:
  std::unique_ptr<Regex> re_;
  SplitBehavior behavior_;
  bool invert_;
};

// ByteLevel: optionally prefixes a space to pieces not starting with one, optionally splits with
// GPT-2's pattern, then maps each byte to its stand-in character.
class ByteLevelPreTokenizer : public PreTokenizer {
 public:
  ByteLevelPreTokenizer(bool add_prefix_space, bool use_regex);
  void apply(std::vector<std::string>& pieces) const override;
  bool byte_level() const override { return true; }

 private:
  bool add_prefix_space_;
  std::unique_ptr<SplitPreTokenizer> gpt2_;  // null unless use_regex
};

class SequencePreTokenizer : public PreTokenizer {
 public:
  explicit SequencePreTokenizer(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void apply(std::vector<std::string>& pieces) const override {
    for (const auto& s : steps_) s->apply(pieces);
  }
  bool byte_level() const override {
    for (const auto& s : steps_)
      if (s->byte_level()) return true;
    return false;
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

// Builds the pre-tokenizer of a tokenizer.json "pre_tokenizer" value (null -> nullptr). `where`
// names the JSON path for error messages.
std::unique_ptr<PreTokenizer> make_pre_tokenizer(const nlohmann::json& j, const std::string& where);

}  // namespace dsa::tok
