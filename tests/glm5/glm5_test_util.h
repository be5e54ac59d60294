// The tiny GLM checkpoint shared by the glm5 tests: `dsa make-tiny --arch glm_moe_dsa --seed 1`
// (FP8), written once per test process into a temp dir (removed at exit).
#pragma once
#include <string>

namespace dsa::test {
const std::string& glm5_tiny_dir();
}
