#include "glm5_test_util.h"

#include <filesystem>
#include <memory>

#include <unistd.h>

#include "dsa/model/checkpoint_tiny.h"

namespace dsa::test {

namespace {
struct TinyDir {
  std::filesystem::path path;
  TinyDir() {
    path = std::filesystem::temp_directory_path() / ("dsa_glm5_tiny_" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    TinyOptions o;
    o.arch = "glm_moe_dsa";
    o.seed = 1;
    o.fp8 = true;
    make_tiny_checkpoint(o, path.string());
  }
  ~TinyDir() { std::filesystem::remove_all(path); }
};
}  // namespace

const std::string& glm5_tiny_dir() {
  static TinyDir dir;
  static const std::string s = dir.path.string();
  return s;
}

}  // namespace dsa::test
