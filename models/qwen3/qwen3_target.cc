#include "models/qwen3/qwen3_target.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "kernels/attention/decode_attention.h"
#include "kernels/elementwise/elementwise.h"
#include "kernels/elementwise/embedding.h"
#include "kernels/norm/fused_norm.h"
#include "kernels/norm/rmsnorm.h"
#include "kernels/rope/rope.h"
#include "kernels/core/stream.h"
#include "kernels/mlp/swiglu.h"

namespace tandem::models {

using kernels::Device;
using kernels::DType;
using kernels::GemmOptions;
using kernels::Shape;
using kernels::Tensor;
using kernels::TensorView;

namespace {

constexpr int64_t kActivationAlignment = 256;  // bytes

Status CheckVector(const char* what, const TensorView& t, int64_t len, Device device) {
  if (t.empty()) return InvalidArgumentError("Qwen3Target::Forward: {} is missing", what);
  if (t.device() != device)
    return InvalidArgumentError("Qwen3Target::Forward: {} is on the wrong device ({})", what,
                                t.ToString());
  RETURN_IF_ERROR(kernels::ExpectDType("Qwen3Target::Forward", what, t, DType::kI32));
  if (t.ndim() != 1 || (len >= 0 && t.dim(0) != len))
    return InvalidArgumentError("Qwen3Target::Forward: {} must be i32 [{}], got {}", what,
                                len >= 0 ? len : t.dim(0), t.ToString());
  return kernels::ExpectContiguous("Qwen3Target::Forward", what, t);
}

Status CheckOutput(const char* what, const TensorView& t, int64_t rows, int64_t cols,
                   Device device, bool allow_f32) {
  const bool dtype_ok = t.dtype() == DType::kBF16 || (allow_f32 && t.dtype() == DType::kF32);
  if (t.device() != device || !dtype_ok || !(t.shape() == Shape{rows, cols}) ||
      !t.is_contiguous()) {
    return InvalidArgumentError(
        "Qwen3Target::Forward: {} must be a contiguous {}[{}, {}] on the model's device, got {}",
        what, allow_f32 ? "bf16/f32 " : "bf16 ", rows, cols, t.ToString());
  }
  return Status::Ok();
}

}  // namespace

Qwen3Target::Qwen3Target(Qwen3Weights weights, const Qwen3TargetOptions& options)
    : weights_(std::move(weights)), options_(options) {}

Qwen3Target::~Qwen3Target() = default;

namespace {

Status CheckPrecisionDevice(Device device, TargetPrecision precision) {
#ifdef TANDEM_HAVE_CUDA
  if (device.is_cuda() && precision == TargetPrecision::kFp8)
    return kernels::cuda::CheckFp8Device(device.index);
#endif
  (void)device, (void)precision;
  return Status::Ok();
}

// Loads or makes the weights through `make(sink)`; with fp8 the sink quantizes each layer's
// projections (a MoE layer's: its attention projections and routed experts) into a
// Qwen3Fp8Projections as they arrive, so the load's peak is the e4m3 model beside one
// staged bf16 layer (Qwen3Weights::StagingBytes), not bf16 + e4m3 of the whole model.
template <typename MakeWeights>
Result<std::unique_ptr<Qwen3Target>> BuildTarget(const TransformerConfig& config,
                                                 kernels::Allocator& alloc,
                                                 const Qwen3TargetOptions& options,
                                                 MakeWeights make) {
  RETURN_IF_ERROR(CheckPrecisionDevice(alloc.device(), options.precision));
  if (options.precision != TargetPrecision::kFp8) {
    ASSIGN_OR_RETURN(Qwen3Weights weights, make(ProjectionSink()));
    return Qwen3Target::Create(std::move(weights), options);
  }
  ASSIGN_OR_RETURN(Qwen3Fp8Projections fp8,
                   Qwen3Fp8Projections::Allocate(config, alloc, options.stream));
  ASSIGN_OR_RETURN(Qwen3Weights weights,
                   make([&fp8](int64_t layer, const Qwen3LayerWeights& staged, kernels::Stream s) {
                     return fp8.QuantizeLayer(layer, staged, s);
                   }));
  return Qwen3Target::Create(std::move(weights), std::move(fp8), options);
}

}  // namespace

Result<std::unique_ptr<Qwen3Target>> Qwen3Target::Create(Qwen3Weights weights,
                                                         Qwen3Fp8Projections fp8,
                                                         const Qwen3TargetOptions& options) {
  if (options.precision != TargetPrecision::kFp8 || weights.has_projections() ||
      fp8.layers().size() != weights.layers().size())
    return InvalidArgumentError("Qwen3Target::Create: FP8 projections of {} layers for weights "
                                "of {} layers {} bf16 projections at precision {}",
                                fp8.layers().size(), weights.layers().size(),
                                weights.has_projections() ? "with" : "without",
                                TargetPrecisionName(options.precision));
  return CreateImpl(std::move(weights), options, std::move(fp8));
}

Result<std::unique_ptr<Qwen3Target>> Qwen3Target::Create(Qwen3Weights weights,
                                                         const Qwen3TargetOptions& options) {
  return CreateImpl(std::move(weights), options, Qwen3Fp8Projections());
}

Result<std::unique_ptr<Qwen3Target>> Qwen3Target::CreateImpl(Qwen3Weights weights,
                                                             const Qwen3TargetOptions& options,
                                                             Qwen3Fp8Projections fp8) {
  const TransformerConfig& c = weights.config();
  if (options.max_tokens <= 0)
    return InvalidArgumentError("Qwen3Target: max_tokens must be positive, got {}",
                                options.max_tokens);
  for (size_t i = 0; i < c.layer_types.size(); ++i) {
    if (c.layer_types[i] != LayerType::kFullAttention)
      return InvalidArgumentError(
          "Qwen3Target: layer {} is {}; only full_attention layers are implemented", i,
          LayerTypeName(c.layer_types[i]));
  }
  if (c.rotary_dim > kernels::kRopeMaxRotaryDim || c.rotary_dim % 2 != 0)
    return InvalidArgumentError("Qwen3Target: rotary_dim {} unsupported (even, <= {})",
                                c.rotary_dim, kernels::kRopeMaxRotaryDim);
  std::unique_ptr<Qwen3Target> t(new Qwen3Target(std::move(weights), options));
  const Device device = t->device();
  RETURN_IF_ERROR(CheckPrecisionDevice(device, options.precision));
  if (!t->weights_.has_projections() && fp8.layers().empty())
    return InvalidArgumentError("Qwen3Target::Create: the weights hold no projections (loaded "
                                "with a ProjectionSink) and no FP8 form of them was given");
  t->fp8_ = std::move(fp8);
  RETURN_IF_ERROR(t->AllocateWorkspace());
  if (c.moe) {
    ASSIGN_OR_RETURN(t->moe_, kernels::MoeLayer::Create(MoeShape(c, options.precision),
                                                        options.max_tokens,
                                                        t->weights_.allocator(), options.stream));
  }
  if (options.precision == TargetPrecision::kFp8) RETURN_IF_ERROR(t->PrepareFp8());
  if (device.is_cuda()) {
#ifdef TANDEM_HAVE_CUDA
    kernels::DeviceGuard guard(device.index);
    ASSIGN_OR_RETURN(t->gemm_, kernels::GemmContext::Create(device.index));
    ASSIGN_OR_RETURN(t->attention_, kernels::CausalVarlenAttention::Create(device.index));
#else
    return UnavailableError("Qwen3Target: CUDA weights in a build without CUDA");
#endif
  }
  return t;
}

kernels::MoeLayerShape Qwen3Target::MoeShape(const TransformerConfig& c,
                                             TargetPrecision precision) {
  return {c.hidden_size, c.moe->num_experts, c.moe->num_experts_per_tok,
          c.moe->moe_intermediate_size, 0, c.moe->norm_topk_prob,
          precision == TargetPrecision::kFp8};
}

Result<std::unique_ptr<Qwen3Target>> Qwen3Target::Load(const std::string& dir,
                                                       kernels::Allocator& alloc,
                                                       const Qwen3TargetOptions& options) {
  RETURN_IF_ERROR(CheckPrecisionDevice(alloc.device(), options.precision));
  ASSIGN_OR_RETURN(TransformerConfig config, LoadTransformerConfig(dir));

  ASSIGN_OR_RETURN(SafetensorsReader reader, SafetensorsReader::Open(dir));
  return BuildTarget(config, alloc, options, [&](const ProjectionSink& sink) {
    return Qwen3Weights::Load(config, reader, alloc, options.stream, sink);
  });
}

Result<std::unique_ptr<Qwen3Target>> Qwen3Target::Random(const TransformerConfig& config,
                                                         kernels::Allocator& alloc, uint64_t seed,
                                                         const Qwen3TargetOptions& options) {
  return BuildTarget(config, alloc, options, [&](const ProjectionSink& sink) {
    return Qwen3Weights::Random(config, alloc, seed, options.stream, 1.f, sink);
  });
}

int64_t Qwen3Target::ActivationLayout(const TransformerConfig& c, int64_t max_tokens,
                                      int64_t* offsets, int64_t* cols) {
  // Rows padded to 4: an FP8 GEMM writes Fp8PaddedRows(T) rows (kernels/gemm/fp8.h).
  const int64_t t = kernels::Fp8PaddedRows(max_tokens), h = c.hidden_size, qd = c.q_dim(),
                kvd = c.kv_dim(), ff = c.HasDenseMlp() ? c.intermediate_size : 0;
  // Activations' members in order: hidden, normed, q_raw, k_raw, q, k, v, attn, gate_up, act.
  const int64_t widths[kActivationSlots] = {h, h, qd, kvd, qd, kvd, kvd, qd, 2 * ff, ff};
  int64_t total = 0;
  for (int i = 0; i < kActivationSlots; ++i) {
    total = (total + kActivationAlignment - 1) / kActivationAlignment * kActivationAlignment;
    offsets[i] = total;
    cols[i] = widths[i];
    total += t * widths[i] * 2;
  }
  return total;
}

int64_t Qwen3Target::WorkspaceBytes(const TransformerConfig& c, int64_t max_tokens,
                                    TargetPrecision precision) {
  int64_t offsets[kActivationSlots], cols[kActivationSlots], code_bytes = 0, scales = 0;
  const int64_t bf16 = ActivationLayout(c, max_tokens, offsets, cols);
  return bf16 +
         (precision == TargetPrecision::kFp8 ? Fp8InputLayout(c, max_tokens, &code_bytes, &scales)
                                             : 0) +
         (c.moe ? kernels::MoeLayer::WorkspaceBytes(MoeShape(c, precision), max_tokens) : 0);
}

Status Qwen3Target::AllocateWorkspace() {
  int64_t offsets[kActivationSlots], cols[kActivationSlots];
  const int64_t total = ActivationLayout(config(), options_.max_tokens, offsets, cols);
  ASSIGN_OR_RETURN(workspace_, Tensor::Empty(weights_.allocator(), DType::kU8, {total},
                                             options_.stream));
  TensorView* const views[kActivationSlots] = {
      &act_.hidden, &act_.normed, &act_.q_raw, &act_.k_raw, &act_.q,
      &act_.k,      &act_.v,      &act_.attn,  &act_.gate_up, &act_.act};
  const int64_t t = kernels::Fp8PaddedRows(options_.max_tokens);
  char* base = static_cast<char*>(workspace_.data());
  for (int i = 0; i < kActivationSlots; ++i)
    *views[i] = TensorView(base + offsets[i], DType::kBF16, {t, cols[i]}, device());
  return Status::Ok();
}

Status Qwen3Target::CheckForward(const PackedBatch& batch, std::span<const LayerCapture> captures,
                                 const TensorView& logits, int* max_seqlen) const {
  const TransformerConfig& c = config();
  const Device dev = device();
  RETURN_IF_ERROR(CheckVector("input_ids", batch.input_ids, -1, dev));
  const int64_t t = batch.input_ids.dim(0);
  if (t < 1 || t > options_.max_tokens)
    return InvalidArgumentError("Qwen3Target::Forward: {} tokens; this target takes 1..{}", t,
                                options_.max_tokens);
  RETURN_IF_ERROR(CheckVector("position_ids", batch.position_ids, t, dev));
  RETURN_IF_ERROR(CheckVector("cu_seqlens", batch.cu_seqlens, -1, dev));
  if (batch.cu_seqlens.dim(0) < 2)
    return InvalidArgumentError("Qwen3Target::Forward: cu_seqlens needs docs+1 >= 2 entries");
  *max_seqlen = batch.max_seqlen;
  if (*max_seqlen <= 0) {
    if (!dev.is_cpu())
      return InvalidArgumentError(
          "Qwen3Target::Forward: max_seqlen must be given on CUDA (reading cu_seqlens would "
          "synchronise the host)");
    const int32_t* cu = batch.cu_seqlens.data_as<int32_t>();
    for (int64_t i = 0; i + 1 < batch.cu_seqlens.dim(0); ++i)
      *max_seqlen = std::max(*max_seqlen, cu[i + 1] - cu[i]);
  }
  std::vector<bool> seen(static_cast<size_t>(c.num_hidden_layers), false);
  for (const LayerCapture& cap : captures) {
    if (cap.layer < 0 || cap.layer >= c.num_hidden_layers)
      return InvalidArgumentError("Qwen3Target::Forward: capture layer {} not in [0, {})",
                                  cap.layer, c.num_hidden_layers);
    if (seen[cap.layer])
      return InvalidArgumentError("Qwen3Target::Forward: layer {} captured twice", cap.layer);
    seen[cap.layer] = true;
    RETURN_IF_ERROR(CheckOutput("capture buffer", cap.out, t, c.hidden_size, dev, false)
                        .WithContext(fmt::format("layer {}", cap.layer)));
  }
  if (!logits.empty())
    RETURN_IF_ERROR(CheckOutput("logits", logits, t, c.vocab_size, dev, true));
  return Status::Ok();
}

Status Qwen3Target::Forward(const PackedBatch& batch, std::span<const LayerCapture> captures,
                            TensorView logits) {
  int max_seqlen = 0;
  RETURN_IF_ERROR(CheckForward(batch, captures, logits, &max_seqlen));
  const TransformerConfig& c = config();
  const kernels::Stream s = options_.stream;
  const int64_t t = batch.input_ids.dim(0);
  int last = logits.empty() ? -1 : static_cast<int>(c.num_hidden_layers) - 1;
  for (const LayerCapture& cap : captures) last = std::max(last, cap.layer);
  if (last < 0) return Status::Ok();

  std::optional<kernels::DeviceGuard> guard;
  if (device().is_cuda()) guard.emplace(device().index);
  kernels::NvtxRange range("Qwen3Target::Forward");
  const TensorView hidden = act_.hidden.Narrow(0, 0, t);
  RETURN_IF_ERROR(kernels::EmbeddingForward(hidden, batch.input_ids, weights_.embed(), s));
  const bool fp8 = options_.precision == TargetPrecision::kFp8;
  for (int i = 0; i <= last; ++i) {
    RETURN_IF_ERROR((fp8 ? LayerFp8(static_cast<size_t>(i), batch, t, max_seqlen)
                         : Layer(weights_.layers()[i], batch, t, max_seqlen))
                        .WithContext(fmt::format("layer {}", i)));
    for (const LayerCapture& cap : captures) {
      if (cap.layer == i) RETURN_IF_ERROR(kernels::Copy(cap.out, hidden, s));
    }
  }
  if (!logits.empty()) {
    const TensorView normed = act_.normed.Narrow(0, 0, t);
    RETURN_IF_ERROR(kernels::RmsNormForward(normed, {}, hidden, weights_.final_norm(),
                                            static_cast<float>(c.rms_norm_eps), s));
    GemmOptions linear;
    linear.trans_b = true;
    RETURN_IF_ERROR(kernels::Gemm(gemm_.get(), normed, weights_.lm_head(), logits, linear, s));
  }
  return Status::Ok();
}

Status Qwen3Target::Layer(const Qwen3LayerWeights& w, const PackedBatch& batch, int64_t t,
                          int max_seqlen, std::span<const KvSlot> kv) {
  const TransformerConfig& c = config();
  const kernels::Stream s = options_.stream;
  const float eps = static_cast<float>(c.rms_norm_eps);
  auto rows = [t](const TensorView& v) { return v.Narrow(0, 0, t); };
  const TensorView hidden = rows(act_.hidden), normed = rows(act_.normed);
  kernels::GemmContext* g = gemm_.get();
  GemmOptions linear;
  linear.trans_b = true;
  GemmOptions residual = linear;  // C = x W^T + C: the residual add fused into the GEMM
  residual.beta = 1.f;

  // Attention block.
  RETURN_IF_ERROR(kernels::RmsNormForward(normed, {}, hidden, w.input_norm, eps, s));
  const TensorView v = rows(act_.v);
  RETURN_IF_ERROR(kernels::Gemm(g, normed, w.q_proj, rows(act_.q_raw), linear, s));
  RETURN_IF_ERROR(kernels::Gemm(g, normed, w.k_proj, rows(act_.k_raw), linear, s));
  RETURN_IF_ERROR(kernels::Gemm(g, normed, w.v_proj, v, linear, s));
  RETURN_IF_ERROR(AttentionBlockRope(w, batch, t, max_seqlen, kv));
  const TensorView attn = rows(act_.attn);
  RETURN_IF_ERROR(kernels::Gemm(g, attn, w.o_proj, hidden, residual, s));

  // MLP block.
  RETURN_IF_ERROR(kernels::RmsNormForward(normed, {}, hidden, w.post_norm, eps, s));
  if (!w.moe.router.empty()) return moe_->Forward(g, w.moe, normed, hidden, s);
  const TensorView gate_up = rows(act_.gate_up), act = rows(act_.act);
  RETURN_IF_ERROR(kernels::Gemm(g, normed, w.gate_up, gate_up, linear, s));
  const auto [gate, up] = kernels::SplitGateUp(gate_up);
  RETURN_IF_ERROR(kernels::SwiGluForward(act, gate, up, s));
  return kernels::Gemm(g, act, w.down_proj, hidden, residual, s);
}

Status Qwen3Target::AttentionBlockRope(const Qwen3LayerWeights& w, const PackedBatch& batch,
                                       int64_t t, int max_seqlen, std::span<const KvSlot> kv) {
  // q_raw, k_raw, v hold the projections; writes attn = attention(norm+RoPE(q, k), v).
  const TransformerConfig& c = config();
  const kernels::Stream s = options_.stream;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const int64_t hq = c.num_attention_heads, hk = c.num_key_value_heads, d = c.head_dim;
  auto rows = [t](const TensorView& v) { return v.Narrow(0, 0, t); };
  const TensorView v = rows(act_.v);
  const TensorView q3 = rows(act_.q).Reshape({t, hq, d});
  const TensorView k3 = rows(act_.k).Reshape({t, hk, d});
  const TensorView q_raw3 = rows(act_.q_raw).Reshape({t, hq, d});
  const TensorView k_raw3 = rows(act_.k_raw).Reshape({t, hk, d});
  const kernels::RopeConfig rope{c.rotary_dim, c.rope_theta};
  if (c.qk_norm && (c.rotary_dim == 0 || c.rotary_dim == d)) {
    // q_norm / k_norm and RoPE in one pass over each (kernels/norm/fused_norm.h: the normed
    // value is rotated in fp32, not rounded to bf16 first).
    const TensorView pos = batch.position_ids;
    RETURN_IF_ERROR(
        kernels::RmsNormRopeForward(q3, {}, q_raw3, w.q_norm, pos, eps, c.rope_theta, s));
    RETURN_IF_ERROR(
        kernels::RmsNormRopeForward(k3, {}, k_raw3, w.k_norm, pos, eps, c.rope_theta, s));
  } else if (c.qk_norm) {  // partial rotation: the norm, then RoPE over the first rotary_dim
    RETURN_IF_ERROR(kernels::RmsNormForward(q3, {}, q_raw3, w.q_norm, eps, s));
    RETURN_IF_ERROR(kernels::RmsNormForward(k3, {}, k_raw3, w.k_norm, eps, s));
    RETURN_IF_ERROR(kernels::RopeForward(q3, q3, batch.position_ids, rope, s));
    RETURN_IF_ERROR(kernels::RopeForward(k3, k3, batch.position_ids, rope, s));
  } else {
    RETURN_IF_ERROR(kernels::RopeForward(q3, q_raw3, batch.position_ids, rope, s));
    RETURN_IF_ERROR(kernels::RopeForward(k3, k_raw3, batch.position_ids, rope, s));
  }
  if (!kv.empty()) {
    const TensorView v3 = v.Reshape({t, hk, d}), attn3 = rows(act_.attn).Reshape({t, hq, d});
    for (const KvSlot& slot : kv) {  // each sequence attends over its own cache
      const int64_t r = slot.row, n = slot.rows, p = slot.past + n;
      RETURN_IF_ERROR(kernels::Copy(slot.k.Narrow(0, slot.past, n), k3.Narrow(0, r, n), s));
      RETURN_IF_ERROR(kernels::Copy(slot.v.Narrow(0, slot.past, n), v3.Narrow(0, r, n), s));
      if (max_seqlen > 0 && kv.size() == 1 && slot.past == 0) {  // Extend's CUDA prefill
        RETURN_IF_ERROR(Attention(q3, k3, v3, batch.cu_seqlens, max_seqlen, attn3));
        continue;
      }
      RETURN_IF_ERROR(kernels::CachedCausalAttentionForward(
          q3.Narrow(0, r, n), slot.k.Narrow(0, 0, p), slot.v.Narrow(0, 0, p), 0.f,
          attn3.Narrow(0, r, n), s));
    }
    return Status::Ok();
  }
  return Attention(q3, k3, v.Reshape({t, hk, d}), batch.cu_seqlens, max_seqlen,
                   rows(act_.attn).Reshape({t, hq, d}));
}

Status Qwen3Target::Attention(const TensorView& q, const TensorView& k, const TensorView& v,
                              const TensorView& cu_seqlens, int max_seqlen,
                              const TensorView& out) {
  if (device().is_cpu()) {
    return kernels::CausalVarlenAttentionForwardCpu(q, k, v, cu_seqlens, max_seqlen, 0.f, out,
                                                    {}, nullptr);
  }
  return attention_->Forward(q, k, v, cu_seqlens, max_seqlen, 0.f, out, {}, options_.stream);
}

}  // namespace tandem::models
