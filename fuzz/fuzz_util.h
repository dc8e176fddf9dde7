// Helpers for the libFuzzer targets in this folder: a scratch directory per process (under
// /dev/shm when it exists, so writing the input as a file costs little) and writing bytes
// to a file there, for parsers whose real entry point takes a path.
//
// Thread-safety: libFuzzer runs one input at a time per process; these are not thread-safe.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace tandem::fuzz {

// The process' scratch directory (created on first use, left for the OS to clean: libFuzzer
// ends with _exit, so no destructor would run).
inline const std::string& ScratchDir() {
  static const std::string dir = [] {
    const char* base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : "/tmp";
    std::string d = std::string(base) + "/tandem_fuzz_" + std::to_string(::getpid());
    std::filesystem::create_directories(d);
    return d;
  }();
  return dir;
}

inline std::string ScratchPath(const std::string& name) { return ScratchDir() + "/" + name; }

// Replaces `path` with `size` bytes of `data`; aborts if it cannot (a broken harness, not
// a finding).
inline void WriteFile(const std::string& path, const void* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) std::abort();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
}

// A property the code promises was broken: crash so libFuzzer reports the input.
#define TANDEM_FUZZ_ASSERT(cond)                                              \
  do {                                                                        \
    if (!(cond)) {                                                            \
      std::fprintf(stderr, "fuzz property failed at %s:%d: %s\n", __FILE__, \
                   __LINE__, #cond);                                          \
      std::abort();                                                           \
    }                                                                         \
  } while (0)

}  // namespace tandem::fuzz
