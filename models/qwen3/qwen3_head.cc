#include "models/qwen3/qwen3_head.h"

#include <vector>

#include "models/io/safetensors.h"
#include "models/io/weight_spec.h"
#include "models/qwen3/qwen3_weights_internal.h"

namespace tandem::models {
namespace {

constexpr const char* kEmbed = "model.embed_tokens.weight";
constexpr const char* kLmHead = "lm_head.weight";

// The specs of the two matrices (one when tied) and their indices in CausalLmWeightSpecs.
std::vector<std::pair<size_t, WeightSpec>> HeadSpecs(const TransformerConfig& c) {
  std::vector<std::pair<size_t, WeightSpec>> out;
  const std::vector<WeightSpec> all = CausalLmWeightSpecs(c);
  for (size_t i = 0; i < all.size(); ++i)
    if (all[i].name == kEmbed || all[i].name == kLmHead) out.emplace_back(i, all[i]);
  return out;
}

}  // namespace

Result<Qwen3Head> Qwen3Head::Allocate(const TransformerConfig& c, kernels::Allocator& alloc,
                                      kernels::Stream stream) {
  const kernels::Device device = alloc.device();
  const int64_t v = c.vocab_size, h = c.hidden_size;
  const int64_t mats = c.tie_word_embeddings ? 1 : 2;
  Qwen3Head head;
  ASSIGN_OR_RETURN(head.storage_, kernels::Tensor::Empty(alloc, kernels::DType::kBF16,
                                                         {mats, v, h}, stream));
  auto* base = static_cast<kernels::bf16*>(head.storage_.data());
  head.embed_ = kernels::TensorView(base, kernels::DType::kBF16, {v, h}, device);
  head.lm_head_ = c.tie_word_embeddings
                      ? head.embed_
                      : kernels::TensorView(base + v * h, kernels::DType::kBF16, {v, h}, device);
  return head;
}

Result<Qwen3Head> Qwen3Head::Load(const std::string& dir, const TransformerConfig& config,
                                  kernels::Allocator& alloc, kernels::Stream stream) {
  const kernels::Device device = alloc.device();
  ASSIGN_OR_RETURN(SafetensorsReader reader, SafetensorsReader::Open(dir));
  std::vector<WeightSpec> specs;
  for (auto& [index, spec] : HeadSpecs(config)) specs.push_back(spec);
  RETURN_IF_ERROR(CheckWeights(reader, specs));
  ASSIGN_OR_RETURN(Qwen3Head head, Allocate(config, alloc, stream));
  std::vector<kernels::bf16> staging(static_cast<size_t>(head.embed_.numel()));
  for (const WeightSpec& s : specs) {
    const kernels::TensorView dst = s.name == kEmbed ? head.embed_ : head.lm_head_;
    RETURN_IF_ERROR(reader.Read(s.name, kernels::DType::kBF16, staging.data(), dst.nbytes()));
    RETURN_IF_ERROR(kernels::CopyFromHost(dst, staging.data(), stream));
    // The staging buffer is reused: wait until this copy has read it.
    RETURN_IF_ERROR(kernels::SynchronizeStream(device, stream));
  }
  return head;
}

Result<Qwen3Head> Qwen3Head::Random(const TransformerConfig& config, kernels::Allocator& alloc,
                                    uint64_t seed, kernels::Stream stream, float scale) {
  const kernels::Device device = alloc.device();
  ASSIGN_OR_RETURN(Qwen3Head head, Allocate(config, alloc, stream));
  ASSIGN_OR_RETURN(kernels::Tensor scratch, kernels::Tensor::Empty(alloc, kernels::DType::kF32,
                                                                   {kRandomChunk}, stream));
  for (auto& [index, spec] : HeadSpecs(config)) {
    const kernels::TensorView dst = spec.name == kEmbed ? head.embed_ : head.lm_head_;
    RETURN_IF_ERROR(FillRandomWeight(spec, index, dst, seed, scale,
                                     RandomHeadBound(config.initializer_range, scale), scratch,
                                     stream));
  }
  RETURN_IF_ERROR(kernels::SynchronizeStream(device, stream));
  return head;
}

}  // namespace tandem::models
