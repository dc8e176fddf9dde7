// tandem-bench: one binary, one subcommand per benchmark family (`tandem-bench store`).
// Each family registers itself with TANDEM_BENCH; main() dispatches by name.
// Benchmarks print a table to stdout; a PyTorch peer (bench/*.py) is run by the same
// command where one exists, and the ratio is printed next to tandem's number.
#pragma once

#include <string>
#include <vector>

namespace tandem::bench {

using BenchFn = int (*)(const std::vector<std::string>& args);

// Registers `fn` under `name`; returns true (for static initialisers).
bool Register(const char* name, const char* help, BenchFn fn);

}  // namespace tandem::bench

#define TANDEM_BENCH(name, help, fn) \
  static const bool tandem_bench_registered_##fn = ::tandem::bench::Register(name, help, fn)
