// GPT-2's byte-level alphabet: every byte 0..255 stands for one printable Unicode character
// (printable Latin-1 bytes map to themselves, the others to U+0100.. in byte order), so that a
// BPE vocabulary over characters covers arbitrary bytes. Used by the ByteLevel pre-tokenizer
// (bytes -> characters) and decoder (characters -> bytes).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace dsa::tok {

// The stand-in character of byte b, as UTF-8.
const std::string& byte_to_char(uint8_t b);

// Byte of a stand-in code point, or nullopt when cp is not in the alphabet.
std::optional<uint8_t> char_to_byte(uint32_t cp);

// Every byte of s replaced by its stand-in character.
std::string bytes_to_chars(std::string_view s);

}  // namespace dsa::tok
