#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench/bench.h"

namespace tandem::bench {
namespace {
struct Entry {
  const char* help;
  BenchFn fn;
};
std::map<std::string, Entry>& Registry() {
  static std::map<std::string, Entry> r;
  return r;
}
}  // namespace

bool Register(const char* name, const char* help, BenchFn fn) {
  Registry()[name] = Entry{help, fn};
  return true;
}

}  // namespace tandem::bench

int main(int argc, char** argv) {
  auto& reg = tandem::bench::Registry();
  if (argc < 2 || reg.find(argv[1]) == reg.end()) {
    std::fprintf(stderr, "usage: tandem-bench FAMILY [args...]\nfamilies:\n");
    for (auto& [name, e] : reg) std::fprintf(stderr, "  %-12s %s\n", name.c_str(), e.help);
    return argc < 2 ? 2 : 2;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  return reg[argv[1]].fn(args);
}
