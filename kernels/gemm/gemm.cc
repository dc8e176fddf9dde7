// Device dispatch for Gemm, and the GemmContext/cuda::Gemm entry points of a build without
// CUDA (they return an error that says how to get a CUDA build).
#include "kernels/gemm/gemm.h"

namespace tandem::kernels {

Status Gemm(GemmContext* ctx, const TensorView& a, const TensorView& b, const TensorView& c,
            const GemmOptions& opt, Stream s) {
  if (a.device().is_cpu()) return cpu::Gemm(ctx, a, b, c, opt, s);
  return cuda::Gemm(ctx, a, b, c, opt, s);
}

#ifndef TANDEM_HAVE_CUDA
struct GemmContext::Impl {};

GemmContext::GemmContext(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GemmContext::~GemmContext() = default;
int GemmContext::device() const { return -1; }
size_t GemmContext::workspace_bytes() const { return 0; }
size_t GemmContext::cached_plans() const { return 0; }

Result<std::unique_ptr<GemmContext>> GemmContext::Create(int, size_t) {
  return UnavailableError("GemmContext: tandem was built without CUDA (configure with "
                          "-DTANDEM_CUDA=ON on a machine with nvcc)");
}

namespace cuda {
Status Gemm(GemmContext*, const TensorView& a, const TensorView&, const TensorView&,
            const GemmOptions&, Stream) {
  return UnavailableError("Gemm: {} is on a CUDA device but tandem was built without CUDA",
                          a.ToString());
}
}  // namespace cuda
#endif

}  // namespace tandem::kernels
