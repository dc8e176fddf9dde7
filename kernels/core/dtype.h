// Element types, devices and the host bf16 type shared by CPU references and CUDA ops.
// Thread-safety: value types only.
#pragma once

#include <cstdint>
#include <cstring>
#include <string_view>

// cudaStream_t is `CUstream_st*`; forward-declaring it keeps CUDA headers out of CPU code.
struct CUstream_st;

namespace tandem::kernels {

// A CUDA stream, or nullptr (the legacy default stream; CPU references ignore it).
using Stream = CUstream_st*;

// kF8E4M3 / kF8E5M2: OCP 8-bit floats (e4m3fn: max 448, no infinities; e5m2: IEEE-like).
enum class DType : uint8_t { kBF16, kF16, kF32, kI32, kI64, kU8, kF8E4M3, kF8E5M2 };

constexpr int64_t DTypeSize(DType t) {
  switch (t) {
    case DType::kBF16: return 2;
    case DType::kF16: return 2;
    case DType::kF32: return 4;
    case DType::kI32: return 4;
    case DType::kI64: return 8;
    case DType::kU8: return 1;
    case DType::kF8E4M3: return 1;
    case DType::kF8E5M2: return 1;
  }
  return 0;
}
std::string_view DTypeName(DType t);

struct Device {
  enum class Kind : uint8_t { kCPU, kCUDA };
  Kind kind = Kind::kCPU;
  int index = 0;  // CUDA ordinal; 0 for CPU

  static constexpr Device Cpu() { return Device{Kind::kCPU, 0}; }
  static constexpr Device Cuda(int i) { return Device{Kind::kCUDA, i}; }
  bool is_cpu() const { return kind == Kind::kCPU; }
  bool is_cuda() const { return kind == Kind::kCUDA; }
  bool operator==(const Device&) const = default;
};

// bfloat16 on the host: the top 16 bits of an IEEE float, rounded to nearest even.
// Same layout as CUDA's __nv_bfloat16, so buffers move between them unchanged.
struct bf16 {
  uint16_t bits = 0;

  bf16() = default;
  explicit bf16(float f) : bits(FromFloat(f)) {}
  explicit operator float() const { return ToFloat(bits); }
  float f() const { return ToFloat(bits); }

  static uint16_t FromFloat(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);  // NaN
    uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
    return static_cast<uint16_t>((u + rounding) >> 16);
  }
  static float ToFloat(uint16_t b) {
    uint32_t u = static_cast<uint32_t>(b) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};
static_assert(sizeof(bf16) == 2);

// Rounds a float through bf16 and back (what storing it in a bf16 tensor does).
inline float RoundBf16(float f) { return bf16::ToFloat(bf16::FromFloat(f)); }

}  // namespace tandem::kernels
