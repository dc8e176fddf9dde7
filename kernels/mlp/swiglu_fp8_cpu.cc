// CPU SwiGLU -> e4m3: SwiGluForward into a bf16 scratch, then QuantizeFp8Activation.
#include <vector>

#include "kernels/mlp/swiglu.h"
#include "kernels/mlp/swiglu_fp8.h"

namespace tandem::kernels {

namespace internal {
Status CheckSwiGluFp8(const char* op, const Fp8GroupActivation& out, const TensorView& gate,
                      const TensorView& up) {
  RETURN_IF_ERROR(CheckFp8Activation(op, out));
  RETURN_IF_ERROR(CheckSwiGlu(op, {&gate, &up}));
  if (gate.dim(1) != out.data.dim(1) || Fp8PaddedRows(gate.dim(0)) != out.data.dim(0))
    return InvalidArgumentError("{}: gate {} does not match the fp8 output {}", op,
                                gate.ToString(), out.data.ToString());
  return ExpectSameDevice(op, gate, out.data);
}
}  // namespace internal

namespace cpu {
Status SwiGluFp8Forward(const Fp8GroupActivation& out, TensorView gate, TensorView up, Stream s) {
  RETURN_IF_ERROR(internal::CheckSwiGluFp8("cpu::SwiGluFp8Forward", out, gate, up));
  const int64_t m = gate.dim(0), n = gate.dim(1);
  std::vector<bf16> y(static_cast<size_t>(m * n));
  const TensorView yv(y.data(), DType::kBF16, {m, n});
  RETURN_IF_ERROR(cpu::SwiGluForward(yv, gate, up, s));
  return cpu::QuantizeFp8Activation(yv, out, s);
}
}  // namespace cpu

Status SwiGluFp8Forward(const Fp8GroupActivation& out, TensorView gate, TensorView up, Stream s) {
  if (gate.device().is_cpu()) return cpu::SwiGluFp8Forward(out, gate, up, s);
#ifdef TANDEM_HAVE_CUDA
  return cuda::SwiGluFp8Forward(out, gate, up, s);
#else
  return UnavailableError("SwiGluFp8Forward: CUDA tensors but tandem was built without CUDA");
#endif
}

}  // namespace tandem::kernels
