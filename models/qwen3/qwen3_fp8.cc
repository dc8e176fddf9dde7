#include "models/qwen3/qwen3_fp8.h"

#include <algorithm>
#include <utility>

#include "kernels/core/stream.h"

namespace tandem::models {

using kernels::DType;
using kernels::Fp8BlockWeight;
using kernels::TensorView;

Result<Qwen3Fp8Projections> Qwen3Fp8Projections::Allocate(const TransformerConfig& c,
                                                          kernels::Allocator& alloc,
                                                          kernels::Stream stream) {
  const kernels::Device device = alloc.device();
  const int64_t h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim(), ff = c.intermediate_size;
  // [N, K] of q, k, v, o, gate|up, down: the order of Qwen3Fp8Layer's fields. A MoE layer
  // takes the first four, then its experts.
  const int64_t shapes[6][2] = {{q, h}, {kv, h}, {kv, h}, {h, q}, {2 * ff, h}, {h, ff}};
  auto dense = [&](int64_t layer) { return c.IsMoeLayer(layer) ? 4 : 6; };
  int64_t total = 0;
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    for (int i = 0; i < dense(layer); ++i)
      total += kernels::Fp8BlockWeightBytes(shapes[i][0], shapes[i][1]);
    if (c.IsMoeLayer(layer))
      total += kernels::MoeFp8ExpertBytes(c.moe->num_experts, c.moe->moe_intermediate_size, h);
  }
  Qwen3Fp8Projections p;
  ASSIGN_OR_RETURN(p.storage_, kernels::Tensor::Empty(alloc, DType::kU8,
                                                      {std::max<int64_t>(total, 1)}, stream));
  char* base = static_cast<char*>(p.storage_.data());
  int64_t offset = 0;
  for (int64_t layer = 0; layer < c.num_hidden_layers; ++layer) {
    Qwen3Fp8Layer l;
    Fp8BlockWeight* dst[6] = {&l.q_proj, &l.k_proj, &l.v_proj, &l.o_proj, &l.gate_up, &l.down_proj};
    for (int i = 0; i < dense(layer); ++i)
      *dst[i] = kernels::CarveFp8BlockWeight(base, &offset, shapes[i][0], shapes[i][1], device);
    if (c.IsMoeLayer(layer))
      l.experts = kernels::CarveMoeFp8Experts(base, &offset, c.moe->num_experts,
                                              c.moe->moe_intermediate_size, h, device);
    p.layers_.push_back(l);
  }
  return p;
}

Status Qwen3Fp8Projections::QuantizeLayer(int64_t layer, const Qwen3LayerWeights& staged,
                                          kernels::Stream stream) {
  if (layer < 0 || layer >= static_cast<int64_t>(layers_.size()))
    return InvalidArgumentError("Qwen3Fp8Projections: layer {} of {}", layer, layers_.size());
  Qwen3Fp8Layer& q = layers_[static_cast<size_t>(layer)];
  const bool moe = !q.experts.empty();
  const std::pair<const TensorView*, Fp8BlockWeight*> pairs[] = {
      {&staged.q_proj, &q.q_proj}, {&staged.k_proj, &q.k_proj},     {&staged.v_proj, &q.v_proj},
      {&staged.o_proj, &q.o_proj}, {&staged.gate_up, &q.gate_up}, {&staged.down_proj, &q.down_proj}};
  for (size_t i = 0; i < (moe ? 4u : 6u); ++i) {
    const auto& [src, dst] = pairs[i];
    if (src->empty())
      return InvalidArgumentError("Qwen3Fp8Projections: layer {}: a bf16 projection is missing",
                                  layer);
    RETURN_IF_ERROR(kernels::QuantizeFp8Weight(*src, *dst, stream)
                        .WithContext(fmt::format("layer {} projection {}", layer, src->ToString())));
  }
  if (moe) {
    if (staged.moe.experts.gate_up.empty() || staged.moe.experts.down.empty())
      return InvalidArgumentError("Qwen3Fp8Projections: layer {}: the bf16 experts are missing",
                                  layer);
    RETURN_IF_ERROR(kernels::QuantizeMoeFp8Experts(staged.moe.experts, q.experts, stream)
                        .WithContext(fmt::format("layer {} experts", layer)));
  }
  return Status::Ok();
}

Result<Qwen3Fp8Projections> Qwen3Fp8Projections::Quantize(const Qwen3Weights& weights,
                                                          kernels::Stream stream) {
  if (!weights.has_projections())
    return InvalidArgumentError("Qwen3Fp8Projections: the bf16 projections were released");
  ASSIGN_OR_RETURN(Qwen3Fp8Projections p,
                   Allocate(weights.config(), weights.allocator(), stream));
  for (size_t layer = 0; layer < weights.layers().size(); ++layer)
    RETURN_IF_ERROR(p.QuantizeLayer(static_cast<int64_t>(layer), weights.layers()[layer], stream));
  RETURN_IF_ERROR(kernels::SynchronizeStream(weights.device(), stream));
  return p;
}

}  // namespace tandem::models
