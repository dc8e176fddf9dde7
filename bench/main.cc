#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "bench/bench.h"

namespace tandem::bench {
namespace {
struct Section {
  const char* help;
  BenchFn fn;
};
// family -> section name -> section
std::map<std::string, std::map<std::string, Section>>& Registry() {
  static std::map<std::string, std::map<std::string, Section>> r;
  return r;
}
}  // namespace

bool Register(const char* family, const char* section, const char* help, BenchFn fn) {
  Registry()[family][section] = Section{help, fn};
  return true;
}

}  // namespace tandem::bench

int main(int argc, char** argv) {
  auto& reg = tandem::bench::Registry();
  if (argc < 2 || reg.find(argv[1]) == reg.end()) {
    std::fprintf(stderr, "usage: tandem-bench FAMILY [args...]\nfamilies:\n");
    for (auto& [family, sections] : reg)
      for (auto& [name, s] : sections)
        std::fprintf(stderr, "  %-10s %-12s %s\n", family.c_str(), name.c_str(), s.help);
    return 2;
  }
  std::vector<std::string> args(argv + 2, argv + argc);
  int rc = 0;
  for (auto& [name, s] : reg[argv[1]]) {
    std::printf("== %s / %s ==\n", argv[1], name.c_str());
    std::fflush(stdout);
    int r = s.fn(args);
    if (r != 0) rc = r;
  }
  return rc;
}
