// tandem-bench: one binary, one subcommand per benchmark family (`tandem-bench store`).
// A family may have several sections (e.g. `kernels` has elementwise, gemm, ...), each
// registered with TANDEM_BENCH; `tandem-bench FAMILY` runs all its sections in name order.
// Benchmarks print a table to stdout; a PyTorch peer (bench/*.py) is run by the same
// command where one exists, and the ratio is printed next to tandem's number.
#pragma once

#include <string>
#include <vector>

namespace tandem::bench {

// Returns 0 on success; args are the command line after the family name.
using BenchFn = int (*)(const std::vector<std::string>& args);

// Registers section `section` of family `family`; returns true (for static initialisers).
bool Register(const char* family, const char* section, const char* help, BenchFn fn);

}  // namespace tandem::bench

#define TANDEM_BENCH(family, section, help, fn) \
  static const bool tandem_bench_registered_##fn = \
      ::tandem::bench::Register(family, section, help, fn)
