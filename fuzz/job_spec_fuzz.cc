// Fuzzes the job file (TOML) parser and its validation: every key, table, array and value
// type, locations in messages, and the did-you-mean suggestions for unknown keys.
#include <string>

#include "fuzz/fuzz_util.h"
#include "runtime/job/job_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto spec = tandem::ParseJobText(text, "fuzz.toml");
  if (spec.ok()) {
    for (const auto& g : spec->actors) TANDEM_FUZZ_ASSERT(g.replicas >= 1);
    for (const auto& c : spec->channels) TANDEM_FUZZ_ASSERT(c.capacity >= 1);
  }
  return 0;
}
