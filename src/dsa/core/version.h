#pragma once
namespace dsa {
inline constexpr const char* kVersion = DSA_VERSION_STR;
}
