// Fuzzes the checkpoint state file (DIR/step_N/tandem_state.json) and the step directory
// names `latest` may hold: every field is validated into a DataLoss that names it, never an
// exception or a nonsense step; what parses must serialize and parse back to the same state.
#include <string>
#include <string_view>

#include "actors/dflash/checkpoint/checkpoint_state.h"
#include "fuzz/fuzz_util.h"

using namespace tandem::dflash;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  if (std::optional<int64_t> step = StepOfDirName(text)) {
    TANDEM_FUZZ_ASSERT(*step >= 0 && StepDirName(*step) == text);
  }
  auto st = ParseResumeState(text, "tandem_state.json");
  if (!st.ok()) {
    TANDEM_FUZZ_ASSERT(st.status().code() == tandem::StatusCode::kDataLoss);
    return 0;
  }
  TANDEM_FUZZ_ASSERT(st->step >= 0 && st->step <= kMaxStateCount);
  TANDEM_FUZZ_ASSERT(st->tokens >= 0 && st->tokens <= kMaxStateCount);
  for (const auto& [replica, pos] : st->positions) {
    TANDEM_FUZZ_ASSERT(replica >= 0 && replica < kMaxStateReplicas);
    TANDEM_FUZZ_ASSERT(pos.epoch >= 0 && pos.next_batch >= 0);
  }
  auto again = ParseResumeState(SerializeResumeState(*st), "round trip");
  TANDEM_FUZZ_ASSERT(again.ok());
  TANDEM_FUZZ_ASSERT(again->step == st->step && again->tokens == st->tokens &&
                     again->positions == st->positions && again->identity == st->identity &&
                     again->files == st->files);
  return 0;
}
