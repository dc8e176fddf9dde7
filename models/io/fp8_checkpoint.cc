#include "models/io/fp8_checkpoint.h"

#include <cstring>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "kernels/gemm/fp8_format.h"

namespace tandem::models {

using kernels::DType;

std::string Fp8ScaleName(std::string_view weight_name) {
  return std::string(weight_name) + "_scale_inv";
}

Status CheckFp8BlockWeight(const SafetensorsReader& reader, const TensorInfo& weight) {
  if (weight.dtype != DType::kF8E4M3)
    return DataLossError("{}: dtype {} is not an FP8 block weight (only F8_E4M3 with "
                         "*_scale_inv is implemented)",
                         reader.Where(weight), SafetensorsDTypeName(weight.dtype));
  if (weight.shape.size() != 2)
    return DataLossError("{}: an FP8 weight must be 2-d, got [{}]", reader.Where(weight),
                         fmt::join(weight.shape, ", "));
  const std::string scale_name = Fp8ScaleName(weight.name);
  const TensorInfo* s = reader.Find(scale_name);
  if (s == nullptr)
    return DataLossError("{}: F8_E4M3 weight without its scale tensor '{}'",
                         reader.Where(weight), scale_name);
  const std::vector<int64_t> want = {(weight.shape[0] + 127) / 128, (weight.shape[1] + 127) / 128};
  if (s->dtype != DType::kF32 || s->shape != want)
    return DataLossError("{}: scales of '{}' must be F32 [{}] (128x128 blocks of [{}]), got {} [{}]",
                         reader.Where(*s), weight.name, fmt::join(want, ", "),
                         fmt::join(weight.shape, ", "), SafetensorsDTypeName(s->dtype),
                         fmt::join(s->shape, ", "));
  return Status::Ok();
}

Status DequantizeFp8BlockWeight(const SafetensorsReader& reader, const TensorInfo& weight,
                                std::span<const std::byte> bytes, std::span<kernels::bf16> out) {
  const int64_t n = weight.shape[0], k = weight.shape[1], kb = (k + 127) / 128;
  if (static_cast<int64_t>(out.size()) != n * k || static_cast<int64_t>(bytes.size()) != n * k)
    return InvalidArgumentError("{}: dequantize buffer holds {} elements, the weight {}",
                                reader.Where(weight), out.size(), n * k);
  std::vector<float> scale(static_cast<size_t>(((n + 127) / 128) * kb));
  RETURN_IF_ERROR(reader.Read(Fp8ScaleName(weight.name), DType::kF32, scale.data(),
                              static_cast<int64_t>(scale.size() * 4)));
  // One decode table for the 256 codes.
  float table[256];
  for (int b = 0; b < 256; ++b) table[b] = kernels::E4m3ToFloat(static_cast<uint8_t>(b));
  const auto* q = reinterpret_cast<const uint8_t*>(bytes.data());
  for (int64_t r = 0; r < n; ++r) {
    const float* srow = scale.data() + (r / 128) * kb;
    for (int64_t c = 0; c < k; ++c)
      out[r * k + c] = kernels::bf16(table[q[r * k + c]] * srow[c / 128]);
  }
  return Status::Ok();
}

}  // namespace tandem::models
