#include "dsa/tokenizer/byte_level.h"

#include <array>

#include "dsa/tokenizer/utf8.h"

namespace dsa::tok {
namespace {

struct Tables {
  std::array<std::string, 256> to_char;
  std::array<int16_t, 512> from_cp;  // stand-in code points are all < 0x144
  Tables() {
    from_cp.fill(-1);
    auto printable = [](int b) { return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF); };
    int next = 0;
    for (int b = 0; b < 256; ++b) {
      uint32_t cp = printable(b) ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + next++);
      utf8_append(to_char[b], cp);
      from_cp[cp] = static_cast<int16_t>(b);
    }
  }
};

const Tables& tables() {
  static const Tables t;
  return t;
}

}  // namespace

const std::string& byte_to_char(uint8_t b) { return tables().to_char[b]; }

std::optional<uint8_t> char_to_byte(uint32_t cp) {
  if (cp >= 512 || tables().from_cp[cp] < 0) return std::nullopt;
  return static_cast<uint8_t>(tables().from_cp[cp]);
}

std::string bytes_to_chars(std::string_view s) {
  const auto& t = tables();
  std::string out;
  out.reserve(s.size() * 2);
  for (char c : s) out += t.to_char[static_cast<uint8_t>(c)];
  return out;
}

}  // namespace dsa::tok
