// CPU reference of PhiloxUniformFill, and its device dispatcher.
#include "kernels/random/philox.h"

namespace tandem::kernels {
namespace cpu {

Status PhiloxUniformFill(TensorView out, float lo, float hi, uint64_t seed, uint64_t offset,
                         Stream) {
  RETURN_IF_ERROR(ExpectDType("PhiloxUniformFill", "out", out, DType::kF32));
  RETURN_IF_ERROR(ExpectContiguous("PhiloxUniformFill", "out", out));
  float* o = out.data_as<float>();
  const float scale = hi - lo;
  for (int64_t i = 0; i < out.numel(); ++i)
    o[i] = PhiloxFma(scale, PhiloxUniform(seed, offset, static_cast<uint64_t>(i)), lo);
  return Status::Ok();
}

}  // namespace cpu

Status PhiloxUniformFill(TensorView out, float lo, float hi, uint64_t seed, uint64_t offset,
                         Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d, DispatchDevice("PhiloxUniformFill", {out}));
#ifdef TANDEM_HAVE_CUDA
  if (d.is_cuda()) return cuda::PhiloxUniformFill(out, lo, hi, seed, offset, s);
#endif
  return cpu::PhiloxUniformFill(out, lo, hi, seed, offset, s);
}

}  // namespace tandem::kernels
