// Subcommand registry of the CLI. A cmd_*.cpp file defines a function that adds its subcommand
// to the CLI::App and calls add_command() from a static initializer (the files are linked into
// the executable directly, so the initializers always run).
#pragma once
#include <functional>
#include <vector>

namespace CLI {
class App;
}

namespace dsa::cli {

using Register = std::function<void(CLI::App&)>;
std::vector<Register>& commands();
bool add_command(Register r);

// Subcommands of `dsa bench` with options of their own (the kernel benchmarks share one set:
// bench/bench.h); `dsa bench` adds each to its CLI::App.
std::vector<Register>& bench_commands();
bool add_bench_command(Register r);

// Exit code the finished subcommand asks for (0 unless set).
int exit_code();
void set_exit_code(int code);

}  // namespace dsa::cli
