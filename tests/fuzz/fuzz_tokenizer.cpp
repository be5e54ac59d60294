// Fuzz target: tokenizer.json (Tokenizer::from_json_text), then encode and decode on what loads.
// The input up to its first NUL byte is the tokenizer.json; the rest (or a fixed sample) is the
// text to encode. Decoding gets the ids encode produced plus ids the vocabulary lacks, which
// decode to nothing and never throw.
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "dsa/core/error.h"
#include "dsa/tokenizer/tokenizer.h"
#include "fuzz_target.h"

DSA_FUZZ_TARGET(tokenizer) {
  if (!dsa::tokenizer_available()) return 0;
  const std::string_view all(reinterpret_cast<const char*>(data), size);
  const size_t nul = all.find('\0');
  const std::string_view json = all.substr(0, nul);
  const std::string text = nul == std::string_view::npos ? std::string("Hello, world! 123 \xC3\xA4\xE4\xBD\xA0 \n\t x")
                                                         : std::string(all.substr(nul + 1));
  std::unique_ptr<dsa::Tokenizer> tok;
  try {
    tok = dsa::Tokenizer::from_json_text(json, "fuzz");
  } catch (const dsa::Error&) {
    return 0;
  }
  try {
    std::vector<int32_t> ids = tok->encode(text, /*add_special_tokens=*/true);
    const auto v = static_cast<int32_t>(tok->vocab_size());
    ids.insert(ids.end(), {-1, v, v + 1, INT32_MAX});
    (void)tok->decode(ids, false);
    (void)tok->decode(ids, true);
  } catch (const dsa::Error&) {  // e.g. a regex match limit: a clean error
  }
  return 0;
}
