// Fuzz target: the /v1/completions request body (server::parse_completion_request) with a
// tokenizer stand-in (bytes -> ids), then the response JSON of an accepted request and its
// streamed text. /v1/chat/completions has no request parser yet (the route answers 501); its
// target belongs beside this one once it has.
#include <string>
#include <vector>

#include "dsa/core/error.h"
#include "dsa/server/openai_protocol.h"
#include "fuzz_target.h"

DSA_FUZZ_TARGET(openai_request) {
  using namespace dsa::server;
  const EncodeFn encode = [](const std::string& s) {
    std::vector<int32_t> ids;
    for (unsigned char ch : s) ids.push_back(ch);
    return ids;
  };
  const DecodeFn decode = [](const std::vector<int32_t>& ids) {
    std::string s;
    for (int32_t id : ids) s.push_back(static_cast<char>(id & 0x7F));
    return s;
  };
  try {
    const CompletionRequest r =
        parse_completion_request(std::string(reinterpret_cast<const char*>(data), size), encode);
    r.params.validate(512);
    IncrementalText text(decode);
    (void)text.add(r.prompt, true);
    (void)completion_json("cmpl-0", 0, "m", r.prompt, decode(r.prompt), "length", Usage{1, 2}).dump();
  } catch (const BadRequest&) {
  } catch (const dsa::Error&) {
  }
  return 0;
}
