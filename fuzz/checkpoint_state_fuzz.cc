// Fuzzes the small files of a checkpoint directory, each fed the same bytes: the checkpoint
// state (DIR/step_N/tandem_state.json), the step directory names `latest` may hold, the
// drafter's trainer_state.json (models/dflash/dflash_trainer_state.h) and DIR/best
// (actors/dflash/drafter_eval_best.h). Every field is validated into a DataLoss that names
// it, never an exception or a nonsense step; what parses must serialize and parse back to
// the same state.
#include <string>
#include <string_view>

#include "actors/dflash/checkpoint/checkpoint_state.h"
#include "actors/dflash/drafter_eval_best.h"
#include "fuzz/fuzz_util.h"
#include "models/dflash/dflash_trainer_state.h"

using namespace tandem::dflash;

namespace {

void CheckTrainerState(std::string_view text) {
  auto ts = tandem::models::ParseDFlashTrainerState(text, "trainer_state.json");
  if (!ts.ok()) {
    TANDEM_FUZZ_ASSERT(ts.status().code() == tandem::StatusCode::kDataLoss);
    return;
  }
  TANDEM_FUZZ_ASSERT(ts->step >= 0 && ts->step <= INT32_MAX);
  auto again = tandem::models::ParseDFlashTrainerState(
      tandem::models::DFlashTrainerStateText(*ts), "round trip");
  TANDEM_FUZZ_ASSERT(again.ok() && again->step == ts->step && again->seed == ts->seed);
}

void CheckBest(const uint8_t* data, size_t size) {
  static const std::string dir = tandem::fuzz::ScratchDir();
  tandem::fuzz::WriteFile(dir + "/" + kBestFile, data, size);
  auto best = ReadBestCheckpoint(dir);
  if (!best.ok()) {
    TANDEM_FUZZ_ASSERT(best.status().code() == tandem::StatusCode::kDataLoss);
    return;
  }
  TANDEM_FUZZ_ASSERT(best->has_value() && (*best)->step >= 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  CheckTrainerState(text);
  CheckBest(data, size);
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
