// CPU reference for kernels/mlp/swiglu.h (fp32 through swiglu_ref.h), checks, and dispatchers.
#include <vector>

#include "kernels/mlp/swiglu.h"
#include "kernels/mlp/swiglu_ref.h"

namespace tandem::kernels {

std::pair<TensorView, TensorView> SplitGateUp(const TensorView& gate_up) {
  TANDEM_CHECK_MSG(gate_up.ndim() == 2 && gate_up.dim(1) % 2 == 0,
                   "SplitGateUp: expected [rows, 2I], got {}", gate_up.ToString());
  const int64_t i = gate_up.dim(1) / 2;
  return {gate_up.Narrow(1, 0, i), gate_up.Narrow(1, i, i)};
}

namespace internal {

Status CheckSwiGlu(const char* op, std::initializer_list<const TensorView*> views) {
  const TensorView& first = **views.begin();
  for (const TensorView* v : views) {
    RETURN_IF_ERROR(ExpectDType(op, "tensor", *v, DType::kBF16));
    if (v->ndim() != 2 || v->shape() != first.shape())
      return InvalidArgumentError("{}: expected matching [rows, I] tensors, got {} and {}", op,
                                  first.ToString(), v->ToString());
    if (v->stride(1) != 1 || v->stride(0) < v->dim(1))
      return InvalidArgumentError("{}: {} needs a contiguous last dim and row stride >= I", op,
                                  v->ToString());
    RETURN_IF_ERROR(ExpectSameDevice(op, first, *v));
  }
  return Status::Ok();
}

}  // namespace internal

namespace cpu {
namespace {

std::vector<float> Gather(const TensorView& t) {
  std::vector<float> v(t.numel());
  for (int64_t r = 0; r < t.dim(0); ++r)
    for (int64_t c = 0; c < t.dim(1); ++c)
      v[r * t.dim(1) + c] = t.data_as<bf16>()[r * t.stride(0) + c].f();
  return v;
}

void Scatter(const std::vector<float>& v, const TensorView& t) {
  for (int64_t r = 0; r < t.dim(0); ++r)
    for (int64_t c = 0; c < t.dim(1); ++c)
      t.data_as<bf16>()[r * t.stride(0) + c] = bf16(v[r * t.dim(1) + c]);
}

}  // namespace

Status SwiGluForward(TensorView out, TensorView gate, TensorView up, Stream) {
  RETURN_IF_ERROR(internal::CheckSwiGlu("SwiGluForward", {&out, &gate, &up}));
  std::vector<float> g = Gather(gate), u = Gather(up), o(g.size());
  ref::SwiGluForward<float>(o.data(), g.data(), u.data(), static_cast<int64_t>(o.size()));
  Scatter(o, out);
  return Status::Ok();
}

Status SwiGluBackward(TensorView dgate, TensorView dup, TensorView dout, TensorView gate,
                      TensorView up, Stream) {
  RETURN_IF_ERROR(internal::CheckSwiGlu("SwiGluBackward", {&dgate, &dup, &dout, &gate, &up}));
  std::vector<float> d = Gather(dout), g = Gather(gate), u = Gather(up), dg(g.size()), du(g.size());
  ref::SwiGluBackward<float>(dg.data(), du.data(), d.data(), g.data(), u.data(),
                             static_cast<int64_t>(g.size()));
  Scatter(dg, dgate);
  Scatter(du, dup);
  return Status::Ok();
}

}  // namespace cpu

Status SwiGluForward(TensorView out, TensorView gate, TensorView up, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d, DispatchDevice("SwiGluForward", {out, gate, up}));
#ifdef TANDEM_HAVE_CUDA
  if (d.is_cuda()) return cuda::SwiGluForward(out, gate, up, s);
#endif
  return cpu::SwiGluForward(out, gate, up, s);
}

Status SwiGluBackward(TensorView dgate, TensorView dup, TensorView dout, TensorView gate,
                      TensorView up, Stream s) {
  ASSIGN_OR_RETURN([[maybe_unused]] Device d,
                   DispatchDevice("SwiGluBackward", {dgate, dup, dout, gate, up}));
#ifdef TANDEM_HAVE_CUDA
  if (d.is_cuda()) return cuda::SwiGluBackward(dgate, dup, dout, gate, up, s);
#endif
  return cpu::SwiGluBackward(dgate, dup, dout, gate, up, s);
}

}  // namespace tandem::kernels
