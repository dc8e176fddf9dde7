// Official FP8 checkpoints (the Qwen3-*-FP8 / DeepSeek-V3 layout, config.json
// quantization_config {quant_method: fp8, weight_block_size: [128, 128]}): a linear weight
// `X.weight` is F8_E4M3 [N, K] and `X.weight_scale_inv` is F32 [ceil(N/128), ceil(K/128)],
// the multiplier of each 128x128 block: value = e4m3 * scale_inv.
//
// tandem loads such weights by dequantizing them to bf16 on the host as it reads them
// (exact up to bf16 rounding of the product). With precision = "bf16" the target then runs
// in bf16; with precision = "fp8" it re-quantizes the bf16 projections with the same 128x128
// blocks, which reproduces the checkpoint's codes except where the bf16 rounding of a
// block's largest value moves its scale.
// Thread-safety: pure functions over a reader that is not modified.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "kernels/core/dtype.h"
#include "models/io/safetensors.h"
#include "runtime/core/status.h"

namespace tandem::models {

// "X.weight" -> "X.weight_scale_inv".
std::string Fp8ScaleName(std::string_view weight_name);

// `weight` (F8_E4M3, 2-d) has a scale tensor of the right dtype and shape; DataLoss naming
// the tensor and file otherwise (F8_E5M2 weights and other layouts are refused).
Status CheckFp8BlockWeight(const SafetensorsReader& reader, const TensorInfo& weight);

// Dequantizes `weight` (its bytes from the reader) into out: bf16 [N * K], host memory.
// REQUIRES: CheckFp8BlockWeight passed.
Status DequantizeFp8BlockWeight(const SafetensorsReader& reader, const TensorInfo& weight,
                                std::span<const std::byte> bytes, std::span<kernels::bf16> out);

}  // namespace tandem::models
