// cuda::MoeQuantizeFp8Slots (kernels/moe/experts_fp8.h): checks, NVTX range, launch
// (experts_fp8.cu).
#include "kernels/core/cuda_check.h"
#include "kernels/core/stream.h"
#include "kernels/moe/experts_fp8.h"
#include "kernels/moe/experts_internal.h"
#include "kernels/moe/moe_kernels.h"

namespace tandem::kernels {
namespace cuda {

Status MoeQuantizeFp8Slots(const TensorView& x, bool from_slots, const TensorView& offsets,
                           std::span<const int32_t> host_offsets, const TensorView& slots,
                           const TensorView& codes, const TensorView& scale, Stream s) {
  constexpr const char* kOp = "cuda::MoeQuantizeFp8Slots";
  RETURN_IF_ERROR(internal::CheckMoeFp8Slots(kOp, x, from_slots, offsets, host_offsets, slots,
                                             codes, scale));
  int64_t total = 0;
  for (size_t e = 0; e + 1 < host_offsets.size(); ++e)
    total += MoeFp8SlotRows(host_offsets[e + 1] - host_offsets[e]);
  NvtxRange range(kOp);
  CUDA_RETURN_IF_ERROR(LaunchMoeQuantizeFp8Slots(
      x.data(), x.stride(0), from_slots, offsets.data_as<const int32_t>(),
      slots.data_as<int32_t>(), offsets.numel() - 1, total, codes.dim(1),
      codes.data_as<uint8_t>(), scale.data_as<float>(), s));
  return Status::Ok();
}

}  // namespace cuda
}  // namespace tandem::kernels
