// CPU reference and dispatcher of kernels/mlp/swiglu_fused.h: the swiglu_ref.h formulas in
// fp32, element by element, one rounding per output (as cpu::SwiGluForward/Backward).
#include "kernels/mlp/swiglu.h"
#include "kernels/mlp/swiglu_fused.h"
#include "kernels/mlp/swiglu_ref.h"

namespace tandem::kernels {
namespace cpu {

Status SwiGluRecomputeBackward(TensorView act, TensorView dgate, TensorView dup, TensorView dout,
                               TensorView gate, TensorView up, Stream) {
  RETURN_IF_ERROR(internal::CheckSwiGlu("SwiGluRecomputeBackward",
                                        {&act, &dgate, &dup, &dout, &gate, &up}));
  for (int64_t r = 0; r < act.dim(0); ++r)
    for (int64_t c = 0; c < act.dim(1); ++c) {
      auto at = [&](const TensorView& t) -> bf16& {
        return t.data_as<bf16>()[r * t.stride(0) + c];
      };
      const float g = at(gate).f(), u = at(up).f(), d = at(dout).f();
      float o, dg, du;
      ref::SwiGluForward<float>(&o, &g, &u, 1);
      ref::SwiGluBackward<float>(&dg, &du, &d, &g, &u, 1);
      at(act) = bf16(o);
      at(dgate) = bf16(dg);
      at(dup) = bf16(du);
    }
  return Status::Ok();
}

}  // namespace cpu

Status SwiGluRecomputeBackward(TensorView act, TensorView dgate, TensorView dup, TensorView dout,
                               TensorView gate, TensorView up, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d, DispatchDevice("SwiGluRecomputeBackward",
                                                             {act, dgate, dup, dout, gate, up}));
#ifdef TANDEM_HAVE_CUDA
  if (d.is_cuda()) return cuda::SwiGluRecomputeBackward(act, dgate, dup, dout, gate, up, s);
#endif
  return cpu::SwiGluRecomputeBackward(act, dgate, dup, dout, gate, up, s);
}

}  // namespace tandem::kernels
