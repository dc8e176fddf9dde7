// Cluster identity: see identity.h.
#include "runtime/cluster/identity.h"

#include <unistd.h>

#include <fmt/format.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#ifndef TANDEM_VERSION
#error "TANDEM_VERSION is set by runtime/cluster/CMakeLists.txt"
#endif
#ifndef TANDEM_GIT_DESCRIBE
#define TANDEM_GIT_DESCRIBE ""
#endif

namespace tandem::cluster {

std::string JobHash(std::string_view job_text) {
  const XXH128_hash_t h = XXH3_128bits(job_text.data(), job_text.size());
  return fmt::format("{:016x}{:016x}", h.high64, h.low64);
}

std::string TandemVersion() {
  const std::string_view describe = TANDEM_GIT_DESCRIBE;
  if (describe.empty()) return TANDEM_VERSION;
  return fmt::format("{} ({})", TANDEM_VERSION, describe);
}

std::string HostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == '\0') return "unknown-host";
  return buf;
}

}  // namespace tandem::cluster
