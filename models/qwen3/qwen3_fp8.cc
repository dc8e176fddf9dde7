#include "models/qwen3/qwen3_fp8.h"

#include <algorithm>

#include "kernels/core/stream.h"

namespace tandem::models {

using kernels::DType;
using kernels::Fp8BlockWeight;
using kernels::TensorView;

Result<TargetPrecision> ParseTargetPrecision(std::string_view s) {
  if (s == "bf16") return TargetPrecision::kBf16;
  if (s == "fp8") return TargetPrecision::kFp8;
  return InvalidArgumentError("precision must be \"bf16\" or \"fp8\", got \"{}\"", s);
}

std::string_view TargetPrecisionName(TargetPrecision p) {
  return p == TargetPrecision::kFp8 ? "fp8" : "bf16";
}

namespace {

constexpr int64_t kAlign = 256;
int64_t AlignUp(int64_t x) { return (x + kAlign - 1) / kAlign * kAlign; }

// Bytes of one quantized [n, k] weight: codes, then scales, each 256-byte aligned.
int64_t Fp8Bytes(int64_t n, int64_t k) {
  return AlignUp(n * k) + AlignUp(kernels::Fp8Blocks(n) * kernels::Fp8WeightScaleLd(k) * 4);
}

Fp8BlockWeight Carve(char* base, int64_t* offset, int64_t n, int64_t k, kernels::Device device) {
  Fp8BlockWeight w;
  w.data = TensorView(base + *offset, DType::kF8E4M3, {n, k}, device);
  *offset += AlignUp(n * k);
  w.scale = TensorView(base + *offset, DType::kF32,
                       {kernels::Fp8Blocks(n), kernels::Fp8WeightScaleLd(k)}, device);
  *offset += AlignUp(w.scale.nbytes());
  return w;
}

}  // namespace

Result<Qwen3Fp8Projections> Qwen3Fp8Projections::Quantize(const Qwen3Weights& weights,
                                                          kernels::Stream stream) {
  const kernels::Device device = weights.device();
  std::vector<const TensorView*> sources;
  for (const Qwen3LayerWeights& l : weights.layers())
    for (const TensorView* v : {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_up, &l.down_proj}) {
      if (v->empty())
        return InvalidArgumentError("Qwen3Fp8Projections: the bf16 projections were released");
      sources.push_back(v);
    }
  int64_t total = 0;
  for (const TensorView* v : sources) total += Fp8Bytes(v->dim(0), v->dim(1));
  kernels::Allocator* alloc = &kernels::HostAllocator();
  if (device.is_cuda()) {
    ASSIGN_OR_RETURN(kernels::CachingPool * pool, kernels::CudaPool(device.index));
    alloc = pool;
  }
  Qwen3Fp8Projections p;
  ASSIGN_OR_RETURN(p.storage_, kernels::Tensor::Empty(*alloc, DType::kU8,
                                                       {std::max<int64_t>(total, 1)}, stream));
  char* base = static_cast<char*>(p.storage_.data());
  int64_t offset = 0;
  size_t i = 0;
  for (size_t layer = 0; layer < weights.layers().size(); ++layer) {
    Qwen3Fp8Layer q;
    for (Fp8BlockWeight* dst : {&q.q_proj, &q.k_proj, &q.v_proj, &q.o_proj, &q.gate_up, &q.down_proj}) {
      const TensorView& src = *sources[i++];
      *dst = Carve(base, &offset, src.dim(0), src.dim(1), device);
      RETURN_IF_ERROR(kernels::QuantizeFp8Weight(src, *dst, stream)
                          .WithContext(fmt::format("layer {} projection {}", layer, src.ToString())));
    }
    p.layers_.push_back(q);
  }
  RETURN_IF_ERROR(kernels::SynchronizeStream(device, stream));
  return p;
}

}  // namespace tandem::models
