#include "models/io/target_precision.h"

namespace tandem::models {

Result<TargetPrecision> ParseTargetPrecision(std::string_view s) {
  if (s == "bf16") return TargetPrecision::kBf16;
  if (s == "fp8") return TargetPrecision::kFp8;
  return InvalidArgumentError("precision must be \"bf16\" or \"fp8\", got \"{}\"", s);
}

std::string_view TargetPrecisionName(TargetPrecision p) {
  return p == TargetPrecision::kFp8 ? "fp8" : "bf16";
}

}  // namespace tandem::models
