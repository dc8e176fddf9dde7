#include "models/qwen3_5/qwen3_5_fp8.h"

#include <algorithm>
#include <utility>

#include "kernels/core/stream.h"

namespace tandem::models {

using kernels::Fp8BlockWeight;
using kernels::TensorView;

namespace {

// A layer's FP8 destinations and its bf16 projections, in one order (that of Shapes).
std::vector<Fp8BlockWeight*> Pairs(const Qwen35LayerWeights& w, Qwen35Fp8Layer& f) {
  if (w.type == HybridLayerType::kLinearAttention)
    return {&f.in_proj, &f.out_proj, &f.gate_up, &f.down_proj};
  return {&f.q_proj, &f.k_proj, &f.v_proj, &f.o_proj, &f.gate_up, &f.down_proj};
}
std::vector<const TensorView*> Sources(const Qwen35LayerWeights& w) {
  if (w.type == HybridLayerType::kLinearAttention)
    return {&w.linear.in_proj, &w.linear.out_proj, &w.gate_up, &w.down_proj};
  return {&w.attn.q_proj, &w.attn.k_proj, &w.attn.v_proj, &w.attn.o_proj, &w.gate_up,
          &w.down_proj};
}

// [N, K] of each projection of a layer of type `t`, in Pairs' order.
std::vector<std::pair<int64_t, int64_t>> Shapes(const Qwen35Config& c, HybridLayerType t) {
  const int64_t h = c.hidden_size, ff = c.intermediate_size, hv = c.linear_num_value_heads;
  if (t == HybridLayerType::kLinearAttention)
    return {{c.conv_dim() + c.linear_value_dim() + 2 * hv, h},
            {h, c.linear_value_dim()},
            {2 * ff, h},
            {h, ff}};
  return {{2 * c.q_dim(), h}, {c.kv_dim(), h}, {c.kv_dim(), h},
          {h, c.q_dim()},     {2 * ff, h},     {h, ff}};
}

}  // namespace

int64_t Qwen35Fp8Projections::Bytes(const Qwen35Config& c) {
  int64_t total = 0;
  for (HybridLayerType t : c.layer_types)
    for (auto [n, k] : Shapes(c, t)) total += kernels::Fp8BlockWeightBytes(n, k);
  return total;
}

Result<Qwen35Fp8Projections> Qwen35Fp8Projections::Allocate(const Qwen35Config& c,
                                                            kernels::Allocator& alloc,
                                                            kernels::Stream stream) {
  const kernels::Device device = alloc.device();
  if (device.is_cuda()) {
    // cuBLASLt's FP8 GEMMs take K and N multiples of 16: refuse here, naming the matrix,
    // rather than at the first forward.
    for (size_t i = 0; i < c.layer_types.size(); ++i)
      for (auto [n, k] : Shapes(c, c.layer_types[i]))
        if (n % 16 != 0 || k % 16 != 0)
          return InvalidArgumentError(
              "{}: precision = \"fp8\": layer {} ({}) has a [{}, {}] projection; FP8 GEMMs on "
              "CUDA need both dimensions multiples of 16 (every Qwen3.5 / 3.6 size is); use "
              "precision = \"bf16\" for this model",
              c.source, i, HybridLayerTypeName(c.layer_types[i]), n, k);
  }
  Qwen35Fp8Projections p;
  ASSIGN_OR_RETURN(p.storage_, kernels::Tensor::Empty(alloc, kernels::DType::kU8,
                                                      {std::max<int64_t>(Bytes(c), 1)}, stream));
  int64_t offset = 0;
  for (HybridLayerType t : c.layer_types) {
    Qwen35Fp8Layer f;
    const std::vector<Fp8BlockWeight*> dst = Pairs(Qwen35LayerWeights{.type = t}, f);
    const auto shapes = Shapes(c, t);
    for (size_t j = 0; j < dst.size(); ++j)
      *dst[j] = kernels::CarveFp8BlockWeight(p.storage_.data(), &offset, shapes[j].first,
                                             shapes[j].second, device);
    p.layers_.push_back(f);
  }
  return p;
}

Status Qwen35Fp8Projections::QuantizeLayer(int64_t layer, const Qwen35LayerWeights& staged,
                                           kernels::Stream stream) {
  if (layer < 0 || layer >= static_cast<int64_t>(layers_.size()))
    return InvalidArgumentError("Qwen35Fp8Projections: layer {} of {}", layer, layers_.size());
  const std::vector<const TensorView*> src = Sources(staged);
  const std::vector<Fp8BlockWeight*> dst = Pairs(staged, layers_[static_cast<size_t>(layer)]);
  for (size_t j = 0; j < src.size(); ++j) {
    const std::string where = fmt::format("layer {} ({})", layer, HybridLayerTypeName(staged.type));
    if (src[j]->empty())
      return InvalidArgumentError("Qwen35Fp8Projections: {}: a bf16 projection is missing", where);
    RETURN_IF_ERROR(kernels::QuantizeFp8Weight(*src[j], *dst[j], stream)
                        .WithContext(fmt::format("{} projection {}", where, src[j]->ToString())));
  }
  return Status::Ok();
}

Result<Qwen35Fp8Projections> Qwen35Fp8Projections::Quantize(const Qwen35Weights& weights,
                                                            kernels::Stream stream) {
  if (!weights.has_projections())
    return InvalidArgumentError("Qwen35Fp8Projections: the bf16 projections were released");
  ASSIGN_OR_RETURN(Qwen35Fp8Projections p,
                   Allocate(weights.config(), weights.allocator(), stream));
  for (size_t i = 0; i < weights.layers().size(); ++i)
    RETURN_IF_ERROR(p.QuantizeLayer(static_cast<int64_t>(i), weights.layers()[i], stream));
  RETURN_IF_ERROR(kernels::SynchronizeStream(weights.device(), stream));
  return p;
}

}  // namespace tandem::models
