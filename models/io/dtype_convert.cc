// Host element conversions used when a checkpoint's dtype differs from the one asked for.
#include <cstring>

#include "kernels/gemm/fp8_format.h"
#include "models/io/safetensors.h"

namespace tandem::models {
namespace {

using kernels::bf16;

template <typename Load, typename Store>
void ConvertLoop(const std::byte* in, int64_t in_size, std::byte* out, int64_t out_size,
                 int64_t n, Load load, Store store) {
  for (int64_t i = 0; i < n; ++i) store(out + i * out_size, load(in + i * in_size));
}

float LoadAsFloat(DType t, const std::byte* p) {
  switch (t) {
    case DType::kBF16: {
      uint16_t b;
      std::memcpy(&b, p, 2);
      return bf16::ToFloat(b);
    }
    case DType::kF16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return HalfToFloat(h);
    }
    case DType::kF32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::kF8E4M3: return kernels::E4m3ToFloat(static_cast<uint8_t>(*p));
    case DType::kF8E5M2: return kernels::E5m2ToFloat(static_cast<uint8_t>(*p));
    default:
      TANDEM_CHECK_MSG(false, "LoadAsFloat: not a float dtype");
  }
  return 0.0f;
}

// F8 tensors convert element by element without any scale (an unscaled FP8 tensor); block-
// scaled FP8 weights go through DequantizeFp8BlockWeight instead.
bool IsFloat(DType t) {
  return t == DType::kBF16 || t == DType::kF16 || t == DType::kF32 || t == DType::kF8E4M3 ||
         t == DType::kF8E5M2;
}

}  // namespace

float HalfToFloat(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / NaN (payload kept)
  } else if (exp != 0) {
    bits = sign | ((exp + 112u) << 23) | (mant << 13);  // rebias 15 -> 127
  } else if (mant == 0) {
    bits = sign;  // +-0
  } else {
    // Subnormal: value = mant * 2^-24; normalise it into an f32 normal.
    int e = -1;
    do {
      mant <<= 1;
      ++e;
    } while ((mant & 0x400u) == 0);
    bits = sign | static_cast<uint32_t>(112 - e) << 23 | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

bool ConvertElements(DType from, const void* in, DType to, void* out, int64_t n) {
  const auto* src = static_cast<const std::byte*>(in);
  auto* dst = static_cast<std::byte*>(out);
  if (from == to) {
    // memcpy needs valid pointers even for 0 bytes; an empty tensor's buffers may be null.
    if (n > 0) std::memcpy(dst, src, static_cast<size_t>(n * kernels::DTypeSize(from)));
    return true;
  }
  if (!IsFloat(from)) return false;
  const int64_t in_size = kernels::DTypeSize(from);
  auto load = [from](const std::byte* p) { return LoadAsFloat(from, p); };
  if (to == DType::kF32) {
    ConvertLoop(src, in_size, dst, 4, n, load,
                [](std::byte* p, float f) { std::memcpy(p, &f, 4); });
    return true;
  }
  if (to == DType::kBF16) {
    ConvertLoop(src, in_size, dst, 2, n, load, [](std::byte* p, float f) {
      uint16_t b = bf16::FromFloat(f);
      std::memcpy(p, &b, 2);
    });
    return true;
  }
  return false;
}

}  // namespace tandem::models
