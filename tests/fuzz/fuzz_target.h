// One parser fuzz target per file (tests/fuzz/fuzz_*.cpp). DSA_FUZZ_TARGET(name) defines the
// target's entry: with -DDSA_LIBFUZZER (the DSA_FUZZ=ON build, clang, tests/fuzz/CMakeLists.txt)
// it is LLVMFuzzerTestOneInput of its own fuzz_<name> executable; in the normal build it is
// dsa_fuzz_<name>(), which test_fuzz (test_fuzz_corpora.cpp) runs over the committed corpus
// (tests/fuzz/corpus/<name>/, crash regressions included) and seeded mutations of it.
//
// The contract of every target: the input either parses or is rejected with the parser's own
// error type (dsa::Error, the server's BadRequest); any other exception escapes (an uncaught
// exception in libFuzzer, a test failure in gtest), and crashes, leaks and undefined behaviour
// are the sanitizers' findings.
#pragma once
#include <cstddef>
#include <cstdint>

#ifdef DSA_LIBFUZZER
#define DSA_FUZZ_TARGET(name) extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size)
#else
#define DSA_FUZZ_TARGET(name) int dsa_fuzz_##name(const uint8_t* data, size_t size)
#endif
