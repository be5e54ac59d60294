// BPE model of tokenizer.json ("model": {"type": "BPE", "vocab", "merges", ...}). A piece is cut
// into its characters (each looked up in the vocabulary), then the adjacent pair with the lowest
// merge rank is merged, leftmost first among equal ranks, until no pair has a merge: the same
// order as the priority queue of `tokenizers` (ties by position). Results are cached per piece.
#pragma once
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace dsa::tok {

class Bpe {
 public:
  // Parses the "model" object; throws dsa::Error naming the field for a malformed one.
  explicit Bpe(const nlohmann::json& model);

  // Appends the ids of one pre-tokenized piece.
  void encode_piece(const std::string& piece, std::vector<int32_t>& out) const;

  const std::unordered_map<std::string, int32_t>& vocab() const { return vocab_; }

 private:
  void merge_word(const std::string& piece, std::vector<int32_t>& out) const;

  std::unordered_map<std::string, int32_t> vocab_;
  // (left id, right id) -> (rank, merged id), keyed as left << 32 | right.
  std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges_;
  std::optional<int32_t> unk_id_;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  std::string prefix_, suffix_;  // continuing_subword_prefix, end_of_word_suffix

  mutable std::mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_;
};

}  // namespace dsa::tok
