// trainer_state.json: see dflash_trainer_state.h.
#include "models/dflash/dflash_trainer_state.h"

#include <nlohmann/json.hpp>

#include "runtime/core/json_parse.h"

namespace tandem::models {
namespace {

constexpr const char* kTrainerFormat = "tandem-dflash-trainer";

}  // namespace

std::string DFlashTrainerStateText(const DFlashTrainerState& state) {
  const nlohmann::json j = {{"format", kTrainerFormat}, {"version", 1}, {"step", state.step},
                            {"seed", state.seed}};
  return j.dump(2) + "\n";
}

Result<DFlashTrainerState> ParseDFlashTrainerState(std::string_view text,
                                                   const std::string& file) {
  Result<nlohmann::json> parsed = ParseJson(text, file);
  if (!parsed.ok())
    return DataLossError("{}: not valid JSON ({})", file, parsed.status().message());
  const nlohmann::json& j = *parsed;
  if (!j.is_object()) return DataLossError("{}: expected a JSON object, got {}", file, j.type_name());
  auto field = [&](const char* key) -> Result<const nlohmann::json*> {
    auto it = j.find(key);
    if (it == j.end()) return DataLossError("{}: field '{}': missing", file, key);
    return &*it;
  };
  for (const auto& [k, unused] : j.items()) {
    if (k != "format" && k != "version" && k != "step" && k != "seed")
      return DataLossError("{}: field '{}': unknown field", file, k.substr(0, 40));
  }
  ASSIGN_OR_RETURN(const nlohmann::json* format, field("format"));
  if (!format->is_string() || format->get<std::string>() != kTrainerFormat)
    return DataLossError("{}: field 'format': expected \"{}\"", file, kTrainerFormat);
  ASSIGN_OR_RETURN(const nlohmann::json* version, field("version"));
  if (!version->is_number_integer() || version->get<int64_t>() != 1)
    return DataLossError("{}: field 'version': expected 1, got {}", file, DescribeJson(*version));
  ASSIGN_OR_RETURN(const nlohmann::json* step, field("step"));
  // The device counts AdamW steps in an int32; a float (1e30) or a negative step is corrupt.
  if (!step->is_number_integer() || step->get<int64_t>() < 0 ||
      (step->is_number_unsigned() && step->get<uint64_t>() > uint64_t{INT32_MAX}) ||
      step->get<int64_t>() > INT32_MAX)
    return DataLossError("{}: field 'step': expected an integer in [0, 2^31), got {}", file,
                         DescribeJson(*step, 40));
  ASSIGN_OR_RETURN(const nlohmann::json* seed, field("seed"));
  if (!seed->is_number_unsigned())
    return DataLossError("{}: field 'seed': expected an integer >= 0, got {}", file,
                         DescribeJson(*seed, 40));
  return DFlashTrainerState{step->get<int64_t>(), seed->get<uint64_t>()};
}

}  // namespace tandem::models
