#include "models/qwen3_5/qwen3_5_fp8.h"

#include <algorithm>
#include <utility>

#include "kernels/core/stream.h"

namespace tandem::models {

using kernels::Fp8BlockWeight;
using kernels::TensorView;

namespace {

// A layer's FP8 destinations and its bf16 projections, in one order (that of Shapes). A MoE
// layer's gate_up / down_proj are its shared expert's (none without one); its routed experts
// are handled apart (MoeFp8ExpertWeights).
std::vector<Fp8BlockWeight*> Pairs(HybridLayerType type, bool moe, bool shared,
                                   Qwen35Fp8Layer& f) {
  std::vector<Fp8BlockWeight*> out;
  if (type == HybridLayerType::kLinearAttention) out = {&f.in_proj, &f.out_proj};
  else out = {&f.q_proj, &f.k_proj, &f.v_proj, &f.o_proj};
  if (!moe || shared) out.insert(out.end(), {&f.gate_up, &f.down_proj});
  return out;
}
std::vector<const TensorView*> Sources(const Qwen35LayerWeights& w, bool moe, bool shared) {
  std::vector<const TensorView*> out;
  if (w.type == HybridLayerType::kLinearAttention) out = {&w.linear.in_proj, &w.linear.out_proj};
  else out = {&w.attn.q_proj, &w.attn.k_proj, &w.attn.v_proj, &w.attn.o_proj};
  if (!moe) out.insert(out.end(), {&w.gate_up, &w.down_proj});
  else if (shared) out.insert(out.end(), {&w.moe.shared_gate_up, &w.moe.shared_down});
  return out;
}

bool HasShared(const Qwen35Config& c) {
  return c.moe && c.moe->shared_expert_intermediate_size > 0;
}

// [N, K] of each projection of a layer of type `t`, in Pairs' order; a MoE layer's experts
// then follow as [2I, H] and [H, I] (each E times).
std::vector<std::pair<int64_t, int64_t>> Shapes(const Qwen35Config& c, HybridLayerType t,
                                                bool with_experts = false) {
  const int64_t h = c.hidden_size, hv = c.linear_num_value_heads;
  std::vector<std::pair<int64_t, int64_t>> out;
  if (t == HybridLayerType::kLinearAttention)
    out = {{c.conv_dim() + c.linear_value_dim() + 2 * hv, h}, {h, c.linear_value_dim()}};
  else
    out = {{2 * c.q_dim(), h}, {c.kv_dim(), h}, {c.kv_dim(), h}, {h, c.q_dim()}};
  const int64_t ff = c.moe ? c.moe->shared_expert_intermediate_size : c.intermediate_size;
  if (ff > 0) out.insert(out.end(), {{2 * ff, h}, {h, ff}});
  if (c.moe && with_experts) {
    const int64_t i = c.moe->moe_intermediate_size;
    out.insert(out.end(), {{2 * i, h}, {h, i}});
  }
  return out;
}

}  // namespace

int64_t Qwen35Fp8Projections::Bytes(const Qwen35Config& c) {
  int64_t total = 0;
  for (HybridLayerType t : c.layer_types) {
    for (auto [n, k] : Shapes(c, t)) total += kernels::Fp8BlockWeightBytes(n, k);
    if (c.moe)
      total += kernels::MoeFp8ExpertBytes(c.moe->num_experts, c.moe->moe_intermediate_size,
                                          c.hidden_size);
  }
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
      for (auto [n, k] : Shapes(c, c.layer_types[i], /*with_experts=*/true))
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
    const std::vector<Fp8BlockWeight*> dst = Pairs(t, c.moe.has_value(), HasShared(c), f);
    const auto shapes = Shapes(c, t);
    for (size_t j = 0; j < dst.size(); ++j)
      *dst[j] = kernels::CarveFp8BlockWeight(p.storage_.data(), &offset, shapes[j].first,
                                             shapes[j].second, device);
    if (c.moe)
      f.experts = kernels::CarveMoeFp8Experts(p.storage_.data(), &offset, c.moe->num_experts,
                                              c.moe->moe_intermediate_size, c.hidden_size,
                                              device);
    p.layers_.push_back(f);
  }
  return p;
}

Status Qwen35Fp8Projections::QuantizeLayer(int64_t layer, const Qwen35LayerWeights& staged,
                                           kernels::Stream stream) {
  if (layer < 0 || layer >= static_cast<int64_t>(layers_.size()))
    return InvalidArgumentError("Qwen35Fp8Projections: layer {} of {}", layer, layers_.size());
  Qwen35Fp8Layer& f = layers_[static_cast<size_t>(layer)];
  const bool moe = !f.experts.empty();
  const bool shared = moe && !f.gate_up.data.empty();
  const std::vector<const TensorView*> src = Sources(staged, moe, shared);
  const std::vector<Fp8BlockWeight*> dst = Pairs(staged.type, moe, shared, f);
  for (size_t j = 0; j < src.size(); ++j) {
    const std::string where = fmt::format("layer {} ({})", layer, HybridLayerTypeName(staged.type));
    if (src[j]->empty())
      return InvalidArgumentError("Qwen35Fp8Projections: {}: a bf16 projection is missing", where);
    RETURN_IF_ERROR(kernels::QuantizeFp8Weight(*src[j], *dst[j], stream)
                        .WithContext(fmt::format("{} projection {}", where, src[j]->ToString())));
  }
  if (moe) {
    if (staged.moe.experts.gate_up.empty() || staged.moe.experts.down.empty())
      return InvalidArgumentError("Qwen35Fp8Projections: layer {}: the bf16 experts are missing",
                                  layer);
    RETURN_IF_ERROR(kernels::QuantizeMoeFp8Experts(staged.moe.experts, f.experts, stream)
                        .WithContext(fmt::format("layer {} experts", layer)));
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
