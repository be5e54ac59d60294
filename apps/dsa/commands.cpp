#include "commands.h"

namespace dsa::cli {

std::vector<Register>& commands() {
  static std::vector<Register> v;
  return v;
}
bool add_command(Register r) {
  commands().push_back(std::move(r));
  return true;
}

std::vector<Register>& bench_commands() {
  static std::vector<Register> v;
  return v;
}
bool add_bench_command(Register r) {
  bench_commands().push_back(std::move(r));
  return true;
}

static int g_exit = 0;
int exit_code() { return g_exit; }
void set_exit_code(int code) { g_exit = code; }

}  // namespace dsa::cli
