// The numeric precision of a frozen target's linear layers (the target actor's `precision`
// key), shared by every target family: bf16 (the default) or fp8 (block-scaled e4m3
// projections, kernels/gemm/fp8.h).
//
// Thread-safety: stateless functions.
#pragma once

#include <cstdint>
#include <string_view>

#include "runtime/core/status.h"

namespace tandem::models {

enum class TargetPrecision : uint8_t { kBf16, kFp8 };
// "bf16" | "fp8"; InvalidArgument naming the allowed values otherwise.
Result<TargetPrecision> ParseTargetPrecision(std::string_view s);
std::string_view TargetPrecisionName(TargetPrecision p);

}  // namespace tandem::models
