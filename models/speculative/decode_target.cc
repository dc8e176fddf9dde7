#include "models/speculative/decode_target.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <vector>

#include "models/io/hf_config.h"
#include "models/qwen3/qwen3_kv_cache.h"
#include "models/qwen3_5/qwen3_5_cache.h"
#include "runtime/core/json_parse.h"

namespace tandem::models {

namespace {

DecodeTargetShape ShapeOf(const TransformerConfig& c) {
  return {c.model_type,    c.hidden_size,             c.vocab_size, c.num_hidden_layers,
          c.eos_token_ids, c.max_position_embeddings, false,        c.moe.has_value()};
}

DecodeTargetShape ShapeOf(const Qwen35Config& c) {
  return {c.model_type,    c.hidden_size,             c.vocab_size, c.num_hidden_layers,
          c.eos_token_ids, c.max_position_embeddings, true,         c.moe.has_value()};
}

class DenseDecodeTarget final : public DecodeTarget {
 public:
  DenseDecodeTarget(Qwen3Target* t, Qwen3KvCache cache, std::unique_ptr<Qwen3Target> owned)
      : target_(t),
        cache_(std::move(cache)),
        owned_(std::move(owned)),
        shape_(ShapeOf(t->config())) {}
  const DecodeTargetShape& shape() const override { return shape_; }
  kernels::Device device() const override { return target_->device(); }
  kernels::Allocator& allocator() const override { return target_->weights().allocator(); }
  int64_t max_tokens() const override { return target_->max_tokens(); }
  int64_t capacity() const override { return cache_.capacity(); }
  int64_t max_rollback() const override { return cache_.capacity(); }
  kernels::TensorView embed() const override { return target_->weights().embed(); }
  kernels::TensorView lm_head() const override { return target_->weights().lm_head(); }
  int64_t length() const override { return cache_.length(); }
  Status Reset() override { return cache_.Crop(0); }
  Status Extend(std::span<const int32_t> tokens, std::span<const LayerCapture> captures,
                kernels::TensorView logits) override {
    return target_->Extend(cache_, tokens, captures, logits);
  }
  Status Crop(int64_t length) override { return cache_.Crop(length); }

 private:
  Qwen3Target* target_;
  Qwen3KvCache cache_;
  std::unique_ptr<Qwen3Target> owned_;  // set when loaded here
  DecodeTargetShape shape_;
};

class HybridDecodeTarget final : public DecodeTarget {
 public:
  HybridDecodeTarget(Qwen35Target* t, Qwen35Cache cache, std::unique_ptr<Qwen35Target> owned)
      : target_(t),
        cache_(std::move(cache)),
        owned_(std::move(owned)),
        shape_(ShapeOf(t->config())) {}
  const DecodeTargetShape& shape() const override { return shape_; }
  kernels::Device device() const override { return target_->device(); }
  kernels::Allocator& allocator() const override { return target_->weights().allocator(); }
  int64_t max_tokens() const override { return target_->max_tokens(); }
  int64_t capacity() const override { return cache_.capacity(); }
  int64_t max_rollback() const override { return cache_.max_block(); }
  kernels::TensorView embed() const override { return target_->weights().embed(); }
  kernels::TensorView lm_head() const override { return target_->weights().lm_head(); }
  int64_t length() const override { return cache_.length(); }
  Status Reset() override { return cache_.Reset(); }
  Status Extend(std::span<const int32_t> tokens, std::span<const LayerCapture> captures,
                kernels::TensorView logits) override {
    caps_.clear();
    for (const LayerCapture& c : captures) caps_.push_back({c.layer, c.out});
    return target_->Extend(cache_, tokens, caps_, logits);
  }
  Status Crop(int64_t length) override { return cache_.Crop(length); }

 private:
  Qwen35Target* target_;
  Qwen35Cache cache_;
  std::unique_ptr<Qwen35Target> owned_;  // set when loaded here
  DecodeTargetShape shape_;
  std::vector<HybridCapture> caps_;
};

// The family of `dir`/config.json (or of the file `dir`) by its model_type; errors name the
// file and the key.
Result<DecodeFamily> ReadFamily(const std::string& dir) {
  std::error_code ec;
  const std::string path = std::filesystem::is_directory(dir, ec) ? dir + "/config.json" : dir;
  Result<nlohmann::json> parsed = ReadJsonFile(path);
  if (!parsed.ok() && parsed.status().code() == StatusCode::kNotFound)
    return NotFoundError("{}: cannot open (a target directory has a config.json)", path);
  if (!parsed.ok()) return parsed.status();
  const nlohmann::json& j = *parsed;
  if (!j.is_object()) return InvalidArgumentError("{}: is not a JSON object", path);
  const auto it = j.find("model_type");
  if (it == j.end() || !it->is_string())
    return InvalidArgumentError("{}: key 'model_type': missing", path);
  const std::string model_type = it->get<std::string>();
  const DecodeFamily f = DecodeFamilyOf(model_type);
  if (f == DecodeFamily::kUnsupported)
    return InvalidArgumentError(
        "{}: key 'model_type': '{}' is not a target tandem decodes (the dense loader's qwen3, "
        "qwen3_moe and llama; the Qwen3.5 / 3.6 hybrid's qwen3_5, qwen3_5_text, qwen3_5_moe "
        "and qwen3_5_moe_text)", path, model_type);
  return f;
}

}  // namespace

DecodeFamily DecodeFamilyOf(const std::string& model_type) {
  for (const char* t : {"qwen3", "qwen3_moe", "llama"})
    if (model_type == t) return DecodeFamily::kDense;
  for (const char* t : {"qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text"})
    if (model_type == t) return DecodeFamily::kHybrid;
  return DecodeFamily::kUnsupported;
}

Result<std::unique_ptr<DecodeTarget>> MakeDecodeTarget(Qwen3Target* target, int64_t capacity,
                                                       kernels::Stream stream) {
  if (target == nullptr) return InvalidArgumentError("MakeDecodeTarget: no target");
  ASSIGN_OR_RETURN(Qwen3KvCache cache, Qwen3KvCache::Create(target->config(), capacity,
                                                            target->weights().allocator(), stream));
  return std::unique_ptr<DecodeTarget>(new DenseDecodeTarget(target, std::move(cache), nullptr));
}

Result<std::unique_ptr<DecodeTarget>> MakeDecodeTarget(Qwen35Target* target, int64_t capacity,
                                                       int64_t max_rollback,
                                                       kernels::Stream stream) {
  if (target == nullptr) return InvalidArgumentError("MakeDecodeTarget: no target");
  ASSIGN_OR_RETURN(Qwen35Cache cache, Qwen35Cache::Create(target->config(), capacity, max_rollback,
                                                          target->weights().allocator(), stream));
  return std::unique_ptr<DecodeTarget>(new HybridDecodeTarget(target, std::move(cache), nullptr));
}

Result<DecodeTargetShape> ReadDecodeTargetShape(const std::string& dir) {
  ASSIGN_OR_RETURN(DecodeFamily family, ReadFamily(dir));
  if (family == DecodeFamily::kHybrid) {
    ASSIGN_OR_RETURN(Qwen35Config c, LoadQwen35Config(dir));
    return ShapeOf(c);
  }
  ASSIGN_OR_RETURN(TransformerConfig c, LoadTransformerConfig(dir));
  return ShapeOf(c);
}

Result<std::unique_ptr<DecodeTarget>> LoadDecodeTarget(const std::string& dir,
                                                       kernels::Allocator& alloc,
                                                       const DecodeTargetOptions& o) {
  ASSIGN_OR_RETURN(DecodeFamily family, ReadFamily(dir));
  if (family == DecodeFamily::kHybrid) {
    ASSIGN_OR_RETURN(
        std::unique_ptr<Qwen35Target> t,
        Qwen35Target::Load(dir, alloc, {.max_tokens = o.max_tokens, .stream = o.stream}));
    ASSIGN_OR_RETURN(Qwen35Cache cache, Qwen35Cache::Create(t->config(), o.capacity, o.max_rollback,
                                                            alloc, o.stream));
    Qwen35Target* raw = t.get();
    return std::unique_ptr<DecodeTarget>(
        new HybridDecodeTarget(raw, std::move(cache), std::move(t)));
  }
  Qwen3TargetOptions to;
  to.max_tokens = o.max_tokens;
  to.stream = o.stream;
  ASSIGN_OR_RETURN(std::unique_ptr<Qwen3Target> t, Qwen3Target::Load(dir, alloc, to));
  ASSIGN_OR_RETURN(Qwen3KvCache cache,
                   Qwen3KvCache::Create(t->config(), o.capacity, alloc, o.stream));
  Qwen3Target* raw = t.get();
  return std::unique_ptr<DecodeTarget>(new DenseDecodeTarget(raw, std::move(cache), std::move(t)));
}

}  // namespace tandem::models
