#include "cli_args.h"

#include <cstdint>

#include "dsa/core/error.h"

namespace dsa::cli {

namespace {
// s as a whole is a decimal integer in [lo, hi].
bool parse_int(const std::string& s, long long lo, long long hi, long long& v) {
  try {
    size_t used = 0;
    v = std::stoll(s, &used);
    return used == s.size() && v >= lo && v <= hi;
  } catch (const std::logic_error&) {
    return false;
  }
}
}  // namespace

Device parse_device(const std::string& s, const char* option) {
  long long n = 0;
  if (s == "cpu") return Device::cpu();
  if (s == "cuda") return Device::cuda(0);
  if (s.rfind("cuda:", 0) == 0 && parse_int(s.substr(5), 0, 1023, n)) return Device::cuda(static_cast<int>(n));
  fail("{}: '{}' (expected cpu, cuda or cuda:N)", option, s);
}

int parse_cuda_device(const std::string& s, const char* option) {
  long long n = 0;
  if (parse_int(s, 0, 1023, n)) return static_cast<int>(n);
  const Device d = parse_device(s, option);
  DSA_CHECK(d.is_cuda(), "{}: '{}' is not a CUDA device (expected cuda, cuda:N or N)", option, s);
  return d.index;
}

std::vector<int32_t> parse_token_ids(const std::string& s, const char* option) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < s.size()) {
    size_t j = s.find_first_of(", ", i);
    if (j == std::string::npos) j = s.size();
    const std::string part = s.substr(i, j - i);
    long long v = 0;
    if (!part.empty()) {
      DSA_CHECK(parse_int(part, 0, INT32_MAX, v), "{}: '{}' is not a token id", option, part);
      ids.push_back(static_cast<int32_t>(v));
    }
    i = j + 1;
  }
  DSA_CHECK(!ids.empty(), "{}: no ids given", option);
  return ids;
}

}  // namespace dsa::cli
