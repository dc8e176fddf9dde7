// CPU reference for kernels/elementwise/concat_noise.h, checks, and the dispatcher.
#include <cmath>

#include "kernels/elementwise/concat_noise.h"
#include "kernels/random/philox.h"

namespace tandem::kernels {
namespace internal {

Status CheckConcatNoise(const TensorView& out, std::span<const TensorView> inputs,
                        float noise_std) {
  constexpr const char* kOp = "ConcatNoiseForward";
  const int64_t k = static_cast<int64_t>(inputs.size());
  if (k < 1 || k > kMaxConcatInputs)
    return InvalidArgumentError("{}: {} inputs, expected 1..{}", kOp, k, kMaxConcatInputs);
  if (!(noise_std >= 0) || std::isinf(noise_std))
    return InvalidArgumentError("{}: noise_std {} must be finite and >= 0", kOp, noise_std);
  const TensorView& x0 = inputs[0];
  if (x0.ndim() != 2)
    return InvalidArgumentError("{}: inputs must be [T, H], got {}", kOp, x0.ToString());
  for (const TensorView& x : inputs) {
    RETURN_IF_ERROR(ExpectDType(kOp, "input", x, DType::kBF16));
    RETURN_IF_ERROR(ExpectShape(kOp, "input", x, x0.shape()));
    RETURN_IF_ERROR(ExpectContiguous(kOp, "input", x));
    RETURN_IF_ERROR(ExpectSameDevice(kOp, out, x));
  }
  RETURN_IF_ERROR(ExpectDType(kOp, "out", out, DType::kBF16));
  RETURN_IF_ERROR(ExpectShape(kOp, "out", out, {x0.dim(0), k * x0.dim(1)}));
  return ExpectContiguous(kOp, "out", out);
}

}  // namespace internal

namespace cpu {

Status ConcatNoiseForward(TensorView out, std::span<const TensorView> inputs, float noise_std,
                          uint64_t seed, uint64_t offset, Stream) {
  RETURN_IF_ERROR(internal::CheckConcatNoise(out, inputs, noise_std));
  const int64_t k = static_cast<int64_t>(inputs.size()), t_n = out.dim(0), h = inputs[0].dim(1);
  bf16* o = out.data_as<bf16>();
  for (int64_t t = 0; t < t_n; ++t)
    for (int64_t i = 0; i < k; ++i)
      for (int64_t c = 0; c < h; ++c) {
        const int64_t e = t * k * h + i * h + c;
        float v = inputs[i].data_as<const bf16>()[t * h + c].f();
        if (noise_std > 0) {
          const float u = PhiloxToUniformSym(PhiloxBlock(seed, offset, e >> 2).v[e & 3]);
          const float n = noise_std * u;
          v = v + n;
        }
        o[e] = bf16(v);
      }
  return Status::Ok();
}

}  // namespace cpu

Status ConcatNoiseForward(TensorView out, std::span<const TensorView> inputs, float noise_std,
                          uint64_t seed, uint64_t offset, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d, DispatchDevice("ConcatNoiseForward", {out}));
#ifdef TANDEM_HAVE_CUDA
  if (d.is_cuda()) return cuda::ConcatNoiseForward(out, inputs, noise_std, seed, offset, s);
#endif
  return cpu::ConcatNoiseForward(out, inputs, noise_std, seed, offset, s);
}

}  // namespace tandem::kernels
