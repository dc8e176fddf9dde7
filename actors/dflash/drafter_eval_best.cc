#include "actors/dflash/drafter_eval_best.h"

#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "actors/dflash/checkpoint/checkpoint_state.h"
#include "models/io/file_util.h"
#include "runtime/core/file_sync.h"
#include "runtime/core/json_parse.h"

namespace tandem::dflash {

Status WriteBestCheckpoint(const std::string& dir, const BestCheckpoint& best) {
  const nlohmann::ordered_json j = {{"dir", StepDirName(best.step)},
                                    {"step", best.step},
                                    {"tau", std::isfinite(best.tau) ? best.tau : 0.0},
                                    {"prompts", best.prompts}};
  RETURN_IF_ERROR(models::WriteFileAtomically(dir + "/" + kBestFile, j.dump() + "\n"));
  return SyncDir(dir);
}

Result<std::optional<BestCheckpoint>> ReadBestCheckpoint(const std::string& dir) {
  const std::string path = dir + "/" + kBestFile;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<BestCheckpoint>();
  ASSIGN_OR_RETURN(std::string text, models::ReadTextFile(path));
  // Malformed or too deeply nested text is "not a record" like any other wrong content.
  const Result<nlohmann::json> parsed = ParseJson(text, path);
  static const nlohmann::json kNull;
  const nlohmann::json& j = parsed.ok() ? *parsed : kNull;
  if (!parsed.ok() || !j.is_object() || !j.contains("step") ||
      !j["step"].is_number_integer() || !j.contains("tau") || !j["tau"].is_number())
    return DataLossError("{}: not a best-checkpoint record (expected {{\"dir\", \"step\", "
                         "\"tau\", \"prompts\"}})", path);
  BestCheckpoint b;
  b.step = j["step"].get<int64_t>();
  b.tau = j["tau"].get<double>();
  if (j.contains("prompts") && j["prompts"].is_number_integer())
    b.prompts = j["prompts"].get<int64_t>();
  if (b.step < 0) return DataLossError("{}: step {} is negative", path, b.step);
  return std::optional<BestCheckpoint>(b);
}

}  // namespace tandem::dflash
