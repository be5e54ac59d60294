// Fuzz target: the /v1/completions request body (server::parse_completion_request) with a
// tokenizer stand-in (bytes -> ids), then what the route builds from an accepted request: its
// sampling checks, the streamed text of its prompts and the response JSON.
#include <string>
#include <vector>

#include "dsa/core/error.h"
#include "dsa/server/openai_protocol.h"
#include "dsa/tokenizer/incremental_text.h"
#include "fuzz_target.h"

DSA_FUZZ_TARGET(openai_request) {
  using namespace dsa::server;
  const EncodeFn encode = [](const std::string& s, bool) {
    std::vector<int32_t> ids;
    for (unsigned char ch : s) ids.push_back(ch);
    return ids;
  };
  auto decode = [](const std::vector<int32_t>& ids) {
    std::string s;
    for (int32_t id : ids) s.push_back(static_cast<char>(id & 0x7F));
    return s;
  };
  try {
    const CompletionRequest r =
        parse_completion_request(std::string(reinterpret_cast<const char*>(data), size), encode);
    r.params.validate(512);
    nlohmann::json choices = nlohmann::json::array();
    for (size_t i = 0; i < r.prompts.size(); ++i) {
      dsa::IncrementalText text(decode);
      const std::string t = text.add(r.prompts[i], true);
      choices.push_back(choice_json(i, t, r.prompts[i], nullptr, "length"));
    }
    (void)completion_json("cmpl-0", 0, "m", std::move(choices), Usage{1, 2}).dump();
  } catch (const BadRequest&) {
  } catch (const dsa::Error&) {
  }
  return 0;
}
