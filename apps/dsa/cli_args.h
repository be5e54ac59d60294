// Argument parsers shared by the `dsa` subcommands. Each throws dsa::Error naming the option and
// the bad value.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "dsa/core/tensor.h"

namespace dsa::cli {

// "cpu", "cuda" (= cuda:0) or "cuda:N".
Device parse_device(const std::string& s, const char* option = "--device");

// A CUDA device: "cuda" (= 0), "cuda:N", or "N" (the older spelling); returns N.
int parse_cuda_device(const std::string& s, const char* option = "--device");

// Token ids separated by commas and/or spaces ("1,2,3", "1 2 3"); each in [0, 2^31). Empty
// items are skipped; at least one id is required.
std::vector<int32_t> parse_token_ids(const std::string& s, const char* option);

}  // namespace dsa::cli
