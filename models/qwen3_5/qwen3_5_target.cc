#include "models/qwen3_5/qwen3_5_target.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "kernels/core/stream.h"
#include "kernels/elementwise/embedding.h"
#include "kernels/attention/decode_attention.h"
#include "kernels/linear_attention/decode_step.h"
#include "kernels/linear_attention/gated_delta_rule.h"
#include "kernels/linear_attention/gated_delta_rule_chunked.h"
#include "kernels/linear_attention/hybrid_ops.h"
#include "kernels/linear_attention/hybrid_ops_fp8.h"
#include "kernels/mlp/swiglu.h"
#include "kernels/mlp/swiglu_fp8.h"
#include "kernels/norm/rmsnorm_fp8.h"
#include "kernels/rope/rope.h"

namespace tandem::models {

using kernels::Device;
using kernels::DType;
using kernels::GemmOptions;
using kernels::Shape;
using kernels::Tensor;
using kernels::TensorView;

namespace {

constexpr int64_t kActivationAlignment = 256;  // bytes
constexpr const char* kOp = "Qwen35Target::Forward";

Status CheckIds(const char* what, const TensorView& t, int64_t len, Device device) {
  if (t.empty()) return InvalidArgumentError("{}: {} is missing", kOp, what);
  if (t.device() != device)
    return InvalidArgumentError("{}: {} is on the wrong device ({})", kOp, what, t.ToString());
  RETURN_IF_ERROR(kernels::ExpectDType(kOp, what, t, DType::kI32));
  if (t.ndim() != 1 || (len >= 0 && t.dim(0) != len))
    return InvalidArgumentError("{}: {} must be i32 [{}], got {}", kOp, what,
                                len >= 0 ? len : t.dim(0), t.ToString());
  return kernels::ExpectContiguous(kOp, what, t);
}

std::string DeviceName(Device d) { return d.is_cpu() ? "cpu" : fmt::format("cuda:{}", d.index); }

GemmOptions Linear(float beta = 0.f) {
  GemmOptions o;
  o.trans_b = true;
  o.beta = beta;  // 1: C = x W^T + C, the residual add fused into the GEMM
  return o;
}

}  // namespace

Qwen35Target::Qwen35Target(Qwen35Weights weights, const Qwen35TargetOptions& options)
    : weights_(std::move(weights)), options_(options) {}

Qwen35Target::~Qwen35Target() = default;

Result<std::unique_ptr<Qwen35Target>> Qwen35Target::Create(Qwen35Weights weights,
                                                           const Qwen35TargetOptions& options) {
  return Create(std::move(weights), Qwen35Fp8Projections(), options);
}

Result<std::unique_ptr<Qwen35Target>> Qwen35Target::Create(Qwen35Weights weights,
                                                           Qwen35Fp8Projections fp8,
                                                           const Qwen35TargetOptions& options) {
  if (options.max_tokens <= 0)
    return InvalidArgumentError("Qwen35Target: max_tokens must be positive, got {}",
                                options.max_tokens);
  const Qwen35Config& c = weights.config();
  if (c.rotary_dim > kernels::kRopeMaxRotaryDim)
    return InvalidArgumentError("Qwen35Target: rotary_dim {} exceeds {}", c.rotary_dim,
                                kernels::kRopeMaxRotaryDim);
  std::unique_ptr<Qwen35Target> t(new Qwen35Target(std::move(weights), options));
  const Device device = t->device();
#ifdef TANDEM_HAVE_CUDA
  if (device.is_cuda() && t->fp8()) RETURN_IF_ERROR(kernels::cuda::CheckFp8Device(device.index));
#endif
  if (t->fp8()) {
    t->fp8_ = std::move(fp8);
    if (t->fp8_.layers().empty()) {
      // Quantized before the workspace exists, and the bf16 matrices freed: the peak is the
      // bf16 weights plus their e4m3 form.
      ASSIGN_OR_RETURN(t->fp8_, Qwen35Fp8Projections::Quantize(t->weights_, options.stream));
      RETURN_IF_ERROR(t->weights_.ReleaseProjections(options.stream));
    }
  } else if (!t->weights_.has_projections()) {
    return InvalidArgumentError("Qwen35Target: bf16 precision with weights whose projections "
                                "were released or handed to a sink");
  }
  RETURN_IF_ERROR(t->AllocateWorkspace());
  if (c.moe) {
    ASSIGN_OR_RETURN(t->moe_, kernels::MoeLayer::Create(MoeShape(c, t->fp8()),
                                                        options.max_tokens,
                                                        t->weights_.allocator(), options.stream));
  }
  if (device.is_cuda()) {
#ifdef TANDEM_HAVE_CUDA
    kernels::DeviceGuard guard(device.index);
    ASSIGN_OR_RETURN(t->gemm_, kernels::GemmContext::Create(device.index));
    ASSIGN_OR_RETURN(t->attention_, kernels::CausalVarlenAttention::Create(device.index));
#else
    return UnavailableError("Qwen35Target: weights on {} in a build without CUDA",
                            DeviceName(device));
#endif
  }
  return t;
}

Result<std::unique_ptr<Qwen35Target>> Qwen35Target::Load(const std::string& dir,
                                                         kernels::Allocator& alloc,
                                                         const Qwen35TargetOptions& options) {
  ASSIGN_OR_RETURN(Qwen35Config config, LoadQwen35Config(dir));
  ASSIGN_OR_RETURN(SafetensorsReader reader, SafetensorsReader::Open(dir));
  if (options.precision != TargetPrecision::kFp8) {
    ASSIGN_OR_RETURN(Qwen35Weights weights,
                     Qwen35Weights::Load(config, reader, alloc, options.stream));
    return Create(std::move(weights), options);
  }
  ASSIGN_OR_RETURN(Qwen35Fp8Projections fp8,
                   Qwen35Fp8Projections::Allocate(config, alloc, options.stream));
  ASSIGN_OR_RETURN(Qwen35Weights weights,
                   Qwen35Weights::Load(config, reader, alloc, options.stream,
                                       [&fp8](int64_t layer, const Qwen35LayerWeights& staged,
                                              kernels::Stream s) {
                                         return fp8.QuantizeLayer(layer, staged, s);
                                       }));
  return Create(std::move(weights), std::move(fp8), options);
}

Result<std::unique_ptr<Qwen35Target>> Qwen35Target::Random(const Qwen35Config& config,
                                                           kernels::Allocator& alloc,
                                                           uint64_t seed,
                                                           const Qwen35TargetOptions& options,
                                                           float scale) {
  if (options.precision != TargetPrecision::kFp8) {
    ASSIGN_OR_RETURN(Qwen35Weights weights,
                     Qwen35Weights::Random(config, alloc, seed, options.stream, scale));
    return Create(std::move(weights), options);
  }
  ASSIGN_OR_RETURN(Qwen35Fp8Projections fp8,
                   Qwen35Fp8Projections::Allocate(config, alloc, options.stream));
  ASSIGN_OR_RETURN(Qwen35Weights weights,
                   Qwen35Weights::Random(config, alloc, seed, options.stream, scale,
                                         [&fp8](int64_t layer, const Qwen35LayerWeights& staged,
                                                kernels::Stream s) {
                                           return fp8.QuantizeLayer(layer, staged, s);
                                         }));
  return Create(std::move(weights), std::move(fp8), options);
}

kernels::MoeLayerShape Qwen35Target::MoeShape(const Qwen35Config& c, bool fp8) {
  return {c.hidden_size,
          c.moe->num_experts,
          c.moe->num_experts_per_tok,
          c.moe->moe_intermediate_size,
          c.moe->shared_expert_intermediate_size,
          c.moe->norm_topk_prob,
          fp8};
}

namespace {
// The dense MLP's width (a MoE config's intermediate_size, if any, is the drafter's only).
int64_t DenseWidth(const Qwen35Config& c) { return c.moe ? 0 : c.intermediate_size; }
}  // namespace

int64_t Qwen35Target::MaxGemmK(const Qwen35Config& c) {
  return std::max({c.hidden_size, c.linear_value_dim(), c.q_dim(), DenseWidth(c)});
}

void Qwen35Target::SlotBytesPerToken(const Qwen35Config& c, int64_t max_tokens,
                                     bool chunked_rule, bool fp8,
                                     int64_t (&per_token)[kNumSlots]) {
  const int64_t hv = c.linear_num_value_heads;
  const int64_t proj = std::max(c.conv_dim() + c.linear_value_dim() + 2 * hv, 2 * c.q_dim());
  // Bytes per token of each slot, in Slot order. With fp8 the gated norm and SwiGLU write
  // e4m3 into kAct8 directly, so kGated and kAct are empty.
  const int64_t bytes[kNumSlots] = {
      2 * c.hidden_size,         2 * c.hidden_size,         2 * proj,
      2 * c.conv_dim(),          4 * hv,                    4 * hv,
      2 * c.linear_value_dim(),  fp8 ? 0 : 2 * c.linear_value_dim(),  2 * c.q_dim(),
      2 * c.kv_dim(),            2 * c.kv_dim(),            2 * c.kv_dim(),
      2 * c.q_dim(),             4 * DenseWidth(c),         fp8 ? 0 : 2 * DenseWidth(c),
      chunked_rule ? ChunkedRuleBytesPerToken(c, max_tokens) : 0,
      // e4m3 codes and one fp32 scale per 128 columns
      fp8 ? MaxGemmK(c) + 4 * kernels::Fp8Blocks(MaxGemmK(c)) : 0};
  std::copy(std::begin(bytes), std::end(bytes), std::begin(per_token));
}

int64_t Qwen35Target::WorkspaceBytes(const Qwen35Config& c, int64_t max_tokens, bool on_cuda,
                                     TargetPrecision precision) {
  const bool chunked = on_cuda && kernels::GatedDeltaRuleChunkedSupports(
                                      c.linear_key_head_dim, c.linear_value_head_dim);
  return LayoutWorkspace(c, max_tokens, chunked, precision == TargetPrecision::kFp8, nullptr) +
         (c.moe ? kernels::MoeLayer::WorkspaceBytes(
                      MoeShape(c, precision == TargetPrecision::kFp8), max_tokens)
                : 0);
}

int64_t Qwen35Target::LayoutWorkspace(const Qwen35Config& c, int64_t max_tokens,
                                      bool chunked_rule, bool fp8,
                                      int64_t (*offsets)[kNumSlots]) {
  int64_t per_token[kNumSlots], total = 0;
  SlotBytesPerToken(c, max_tokens, chunked_rule, fp8, per_token);
  const int64_t rows = kernels::Fp8PaddedRows(max_tokens);
  for (int s = 0; s < kNumSlots; ++s) {
    total = (total + kActivationAlignment - 1) / kActivationAlignment * kActivationAlignment;
    if (offsets != nullptr) (*offsets)[s] = total;
    total += rows * per_token[s];
  }
  return total;
}

Status Qwen35Target::AllocateWorkspace() {
  int64_t offsets[kNumSlots];
  SlotBytesPerToken(config(), options_.max_tokens, UsesChunkedRule(), fp8(), slot_bytes_);
  const int64_t total =
      LayoutWorkspace(config(), options_.max_tokens, UsesChunkedRule(), fp8(), &offsets);
  ASSIGN_OR_RETURN(workspace_, Tensor::Empty(weights_.allocator(), DType::kU8, {total}, options_.stream));
  for (int s = 0; s < kNumSlots; ++s)
    slots_[s] = static_cast<char*>(workspace_.data()) + offsets[s];
  return Status::Ok();
}

int64_t Qwen35Target::ChunkedRuleBytesPerToken(const Qwen35Config& c, int64_t max_tokens) {
  const int64_t n = std::max<int64_t>(max_tokens, 1);
  const int64_t bytes = kernels::GatedDeltaRuleChunkedWorkspaceBytes(
      n, c.linear_num_key_heads, c.linear_num_value_heads, c.linear_key_head_dim,
      c.linear_value_head_dim);
  return (bytes + n - 1) / n;
}

bool Qwen35Target::UsesChunkedRule() const {
  return device().is_cuda() && kernels::GatedDeltaRuleChunkedSupports(
                                   config().linear_key_head_dim, config().linear_value_head_dim);
}

TensorView Qwen35Target::View(Slot slot, int64_t rows, int64_t cols) const {
  const DType dtype = slot == kGate || slot == kBeta   ? DType::kF32
                      : slot == kRule || slot == kAct8 ? DType::kU8
                                                       : DType::kBF16;
  return TensorView(slots_[slot], dtype, {rows, cols}, device());
}

Status Qwen35Target::CheckForward(const HybridBatch& batch, std::span<const HybridCapture> captures,
                                  int* max_seqlen) const {
  const Qwen35Config& c = config();
  const Device dev = device();
  RETURN_IF_ERROR(CheckIds("input_ids", batch.input_ids, -1, dev));
  const int64_t t = batch.input_ids.dim(0);
  if (t < 1 || t > options_.max_tokens)
    return InvalidArgumentError("{}: {} tokens; this target takes 1..{}", kOp, t,
                                options_.max_tokens);
  RETURN_IF_ERROR(CheckIds("position_ids", batch.position_ids, t, dev));
  RETURN_IF_ERROR(CheckIds("cu_seqlens", batch.cu_seqlens, -1, dev));
  RETURN_IF_ERROR(kernels::internal::CheckCuSeqlensShape(kOp, batch.cu_seqlens));
  if (dev.is_cpu()) {
    RETURN_IF_ERROR(kernels::internal::CheckHostCuSeqlens(kOp, batch.cu_seqlens, t));
    const int32_t* cu = batch.cu_seqlens.data_as<int32_t>();
    int longest = 0;
    for (int64_t i = 0; i + 1 < batch.cu_seqlens.dim(0); ++i)
      longest = std::max(longest, cu[i + 1] - cu[i]);
    if (batch.max_seqlen != 0 && batch.max_seqlen < longest)
      return InvalidArgumentError("{}: max_seqlen {} is below the longest document ({})", kOp,
                                  batch.max_seqlen, longest);
    *max_seqlen = longest;
  } else {
    if (batch.max_seqlen <= 0 || batch.max_seqlen > t)
      return InvalidArgumentError(
          "{}: max_seqlen must be given in 1..T on CUDA (reading cu_seqlens would synchronise "
          "the host), got {}",
          kOp, batch.max_seqlen);
    *max_seqlen = batch.max_seqlen;
  }
  std::vector<bool> seen(static_cast<size_t>(c.num_hidden_layers), false);
  for (const HybridCapture& cap : captures) {
    if (cap.layer < 0 || cap.layer >= c.num_hidden_layers)
      return InvalidArgumentError("{}: capture layer {} not in [0, {})", kOp, cap.layer,
                                  c.num_hidden_layers);
    if (seen[cap.layer]) return InvalidArgumentError("{}: layer {} captured twice", kOp, cap.layer);
    seen[cap.layer] = true;
    const TensorView& o = cap.out;
    if (o.device() != dev || o.dtype() != DType::kBF16 || !(o.shape() == Shape{t, c.hidden_size}) ||
        !o.is_contiguous())
      return InvalidArgumentError(
          "{}: layer {}: the capture buffer must be a contiguous bf16 [{}, {}] on {}, got {}", kOp,
          cap.layer, t, c.hidden_size, DeviceName(dev), o.ToString());
  }
  return Status::Ok();
}

Status Qwen35Target::Forward(const HybridBatch& batch, std::span<const HybridCapture> captures) {
  int max_seqlen = 0;
  RETURN_IF_ERROR(CheckForward(batch, captures, &max_seqlen));
  const Qwen35Config& c = config();
  const kernels::Stream s = options_.stream;
  const int64_t t = batch.input_ids.dim(0);
  int last = -1;
  for (const HybridCapture& cap : captures) last = std::max(last, cap.layer);
  if (last < 0) return Status::Ok();
  std::optional<kernels::DeviceGuard> guard;
  if (device().is_cuda()) guard.emplace(device().index);
  kernels::NvtxRange range(kOp);
  const TensorView hidden = View(kHidden, t, c.hidden_size);
  RETURN_IF_ERROR(kernels::EmbeddingForward(hidden, batch.input_ids, weights_.embed(), s));
  for (int i = 0; i <= last; ++i) {
    RETURN_IF_ERROR(Layer(i, batch, t, max_seqlen, nullptr, nullptr)
                        .WithContext(fmt::format("layer {} ({})", i,
                                                 HybridLayerTypeName(weights_.layers()[i].type))));
    for (const HybridCapture& cap : captures) {
      if (cap.layer == i) RETURN_IF_ERROR(kernels::Copy(cap.out, hidden, s));
    }
  }
  return Status::Ok();
}

Status Qwen35Target::Layer(int i, const HybridBatch& batch, int64_t t, int max_seqlen,
                           const Qwen35LinearDecode* dec, const KvRows* kv) {
  const Qwen35LayerWeights& w = weights_.layers()[i];
  ASSIGN_OR_RETURN(const LinearInput x, NormedHidden(w.input_norm, t));
  RETURN_IF_ERROR(w.type == HybridLayerType::kLinearAttention
                      ? LinearAttention(i, x, batch, t, dec)
                      : FullAttention(i, x, batch, t, max_seqlen, kv));
  return Mlp(i, t);
}

const Qwen35Fp8Layer& Qwen35Target::Fp8Layer(int i) const {
  static const Qwen35Fp8Layer kNone;
  return fp8() ? fp8_.layers()[static_cast<size_t>(i)] : kNone;
}

kernels::Fp8GroupActivation Qwen35Target::Act8(int64_t t, int64_t k) const {
  // The slot holds the scales of Fp8PaddedRows(max_tokens) rows of the widest K, then codes.
  const int64_t rows = kernels::Fp8PaddedRows(options_.max_tokens), tp = kernels::Fp8PaddedRows(t);
  const int64_t scales = kernels::Fp8ActScaleElems(rows, MaxGemmK(config()));
  char* base = slots_[kAct8];
  return {TensorView(base + scales * 4, DType::kF8E4M3, {tp, k}, device()),
          TensorView(base, DType::kF32, {scales}, device())};
}

Result<Qwen35Target::LinearInput> Qwen35Target::NormedHidden(const TensorView& w, int64_t t,
                                                             bool bf16) {
  const Qwen35Config& c = config();
  const float eps = static_cast<float>(c.rms_norm_eps);
  const TensorView hidden = View(kHidden, t, c.hidden_size);
  LinearInput x;
  if (fp8() && !bf16) {
    x.fp8 = Act8(t, c.hidden_size);
    RETURN_IF_ERROR(kernels::RmsNormFp8Forward(x.fp8, hidden, w, eps, options_.stream,
                                               /*weight_offset=*/1.f));
  } else {
    x.bf16 = View(kNormed, t, c.hidden_size);
    RETURN_IF_ERROR(kernels::ZeroCentredRmsNormForward(x.bf16, hidden, w, eps, options_.stream));
  }
  return x;
}

Status Qwen35Target::Project(const LinearInput& x, const TensorView& w,
                             const kernels::Fp8BlockWeight& w8, const TensorView& y, float beta) {
  if (!fp8()) return kernels::Gemm(gemm_.get(), x.bf16, w, y, Linear(beta), options_.stream);
  // The GEMM writes Fp8PaddedRows(t) rows: every slot has room for them.
  const TensorView padded(y.data(), y.dtype(), {x.fp8.data.dim(0), y.dim(1)}, y.device());
  return kernels::Fp8Gemm(gemm_.get(), x.fp8, w8, padded, Linear(beta), options_.stream);
}

Status Qwen35Target::LinearAttention(int i, const LinearInput& x, const HybridBatch& batch,
                                     int64_t t, const Qwen35LinearDecode* dec) {
  const Qwen35Config& c = config();
  const Qwen35LinearAttentionWeights& w = weights_.layers()[i].linear;
  const Qwen35Fp8Layer& f = Fp8Layer(i);
  const kernels::Stream s = options_.stream;
  const int64_t conv = c.conv_dim(), vd = c.linear_value_dim(), kd = c.linear_key_dim(),
                hv = c.linear_num_value_heads;
  const TensorView proj = View(kProj, t, conv + vd + 2 * hv);  // qkv | z | b | a
  RETURN_IF_ERROR(Project(x, w.in_proj, f.in_proj, proj));
  // q | k | v after conv + SiLU; when decoding a block, in the cache (kept for a replay).
  const bool block = dec != nullptr && !dec->mixed.empty();
  const TensorView mixed = block ? dec->mixed : View(kConv, t, conv);
  if (dec != nullptr) {
    RETURN_IF_ERROR(kernels::CausalConv1dSiluStep(mixed, dec->history, proj.Narrow(1, 0, conv),
                                                  dec->conv_state, w.conv1d, s));
  } else {
    RETURN_IF_ERROR(kernels::CausalConv1dSiluForward(mixed, proj.Narrow(1, 0, conv), w.conv1d,
                                                     batch.cu_seqlens, s));
  }
  const TensorView g = block ? dec->g : View(kGate, t, hv);
  const TensorView beta = block ? dec->beta : View(kBeta, t, hv);
  RETURN_IF_ERROR(kernels::GatedDeltaGates(g, beta, proj.Narrow(1, conv + vd + hv, hv),
                                           proj.Narrow(1, conv + vd, hv), w.a_log, w.dt_bias, s));
  kernels::GatedDeltaRuleArgs rule;
  rule.q = mixed.Narrow(1, 0, kd);
  rule.k = mixed.Narrow(1, kd, kd);
  rule.v = mixed.Narrow(1, 2 * kd, vd);
  rule.g = g;
  rule.beta = beta;
  rule.cu_seqlens = batch.cu_seqlens;
  rule.out = View(kCore, t, vd);
  rule.key_heads = c.linear_num_key_heads;
  rule.value_heads = hv;
  rule.key_dim = c.linear_key_head_dim;
  rule.value_dim = c.linear_value_head_dim;
  if (dec != nullptr) {
    RETURN_IF_ERROR(kernels::GatedDeltaRuleStep({rule, dec->state_in, dec->state_out}, s));
  } else if (UsesChunkedRule()) {
    RETURN_IF_ERROR(kernels::GatedDeltaRuleChunkedForward(
        rule, View(kRule, options_.max_tokens, slot_bytes_[kRule]), s));
  } else {
    RETURN_IF_ERROR(kernels::GatedDeltaRuleForward(rule, s));
  }
  // The gated norm, or with fp8 the gated norm quantized as it is produced.
  const TensorView z = proj.Narrow(1, conv, vd);
  const float eps = static_cast<float>(c.rms_norm_eps);
  LinearInput g_in;
  if (fp8()) {
    g_in.fp8 = Act8(t, vd);
    RETURN_IF_ERROR(kernels::GatedRmsNormFp8Forward(g_in.fp8, rule.out, z, w.norm, eps, s));
  } else {
    g_in.bf16 = View(kGated, t, vd);
    RETURN_IF_ERROR(kernels::GatedRmsNormForward(g_in.bf16, rule.out, z, w.norm, eps, s));
  }
  return Project(g_in, w.out_proj, f.out_proj, View(kHidden, t, c.hidden_size), 1.f);
}

Status Qwen35Target::FullAttention(int i, const LinearInput& x, const HybridBatch& batch,
                                   int64_t t, int max_seqlen, const KvRows* kv) {
  const Qwen35Config& c = config();
  const Qwen35AttentionWeights& w = weights_.layers()[i].attn;
  const Qwen35Fp8Layer& f = Fp8Layer(i);
  const kernels::Stream s = options_.stream;
  const float eps = static_cast<float>(c.rms_norm_eps);
  const int64_t hq = c.num_attention_heads, hk = c.num_key_value_heads, d = c.head_dim;
  const TensorView qg = View(kProj, t, 2 * c.q_dim());  // per head: query d | gate d
  const TensorView k_raw = View(kKRaw, t, c.kv_dim()), v = View(kV, t, c.kv_dim());
  RETURN_IF_ERROR(Project(x, w.q_proj, f.q_proj, qg));
  RETURN_IF_ERROR(Project(x, w.k_proj, f.k_proj, k_raw));
  RETURN_IF_ERROR(Project(x, w.v_proj, f.v_proj, v));
  const TensorView qg_rows = qg.Reshape({t * hq, 2 * d});
  const TensorView q = View(kQ, t * hq, d), k = View(kK, t * hk, d);
  RETURN_IF_ERROR(kernels::ZeroCentredRmsNormForward(q, qg_rows.Narrow(1, 0, d), w.q_norm, eps, s));
  RETURN_IF_ERROR(
      kernels::ZeroCentredRmsNormForward(k, k_raw.Reshape({t * hk, d}), w.k_norm, eps, s));
  const TensorView q3 = q.Reshape({t, hq, d}), k3 = k.Reshape({t, hk, d});
  const kernels::RopeConfig rope{c.rotary_dim, c.rope_theta};
  RETURN_IF_ERROR(kernels::RopeForward(q3, q3, batch.position_ids, rope, s));
  RETURN_IF_ERROR(kernels::RopeForward(k3, k3, batch.position_ids, rope, s));
  const TensorView attn = View(kAttn, t * hq, d);
  const TensorView v3 = v.Reshape({t, hk, d}), attn3 = attn.Reshape({t, hq, d});
  if (kv != nullptr) {
    const int64_t p = kv->past + t;
    RETURN_IF_ERROR(kernels::Copy(kv->k.Narrow(0, kv->past, t), k3, s));
    RETURN_IF_ERROR(kernels::Copy(kv->v.Narrow(0, kv->past, t), v3, s));
    RETURN_IF_ERROR(kernels::CachedCausalAttentionForward(q3, kv->k.Narrow(0, 0, p),
                                                          kv->v.Narrow(0, 0, p), 0.f, attn3, s));
  } else if (device().is_cpu()) {
    RETURN_IF_ERROR(kernels::CausalVarlenAttentionForwardCpu(q3, k3, v3, batch.cu_seqlens,
                                                             max_seqlen, 0.f, attn3, {}, s));
  } else {
    RETURN_IF_ERROR(
        attention_->Forward(q3, k3, v3, batch.cu_seqlens, max_seqlen, 0.f, attn3, {}, s));
  }
  // attn * sigmoid(gate) in place, or with fp8 straight to e4m3 (heads side by side per token).
  const TensorView gate = qg_rows.Narrow(1, d, d);
  LinearInput a_in;
  if (fp8()) {
    a_in.fp8 = Act8(t, c.q_dim());
    RETURN_IF_ERROR(kernels::SigmoidGateFp8Forward(a_in.fp8, attn, gate, s));
  } else {
    RETURN_IF_ERROR(kernels::SigmoidGateForward(attn, attn, gate, s));
    a_in.bf16 = attn.Reshape({t, c.q_dim()});
  }
  return Project(a_in, w.o_proj, f.o_proj, View(kHidden, t, c.hidden_size), 1.f);
}

Status Qwen35Target::Mlp(int i, int64_t t) {
  const Qwen35Config& c = config();
  const Qwen35LayerWeights& w = weights_.layers()[i];
  const Qwen35Fp8Layer& f = Fp8Layer(i);
  const kernels::Stream s = options_.stream;
  // A MoE block takes the bf16 norm (its router and row gather), FP8 or not.
  ASSIGN_OR_RETURN(const LinearInput x, NormedHidden(w.post_norm, t, moe_ != nullptr));
  if (moe_ != nullptr) {
    kernels::MoeLayerWeights m = w.moe;
    if (fp8()) {
      m.experts8 = f.experts;
      m.shared_gate_up8 = f.gate_up;
      m.shared_down8 = f.down_proj;
    }
    return moe_->Forward(gemm_.get(), m, x.bf16, View(kHidden, t, c.hidden_size), s);
  }
  const TensorView gate_up = View(kGateUp, t, 2 * c.intermediate_size);
  RETURN_IF_ERROR(Project(x, w.gate_up, f.gate_up, gate_up));
  const auto [gate, up] = kernels::SplitGateUp(gate_up);
  LinearInput act;
  if (fp8()) {
    act.fp8 = Act8(t, c.intermediate_size);
    RETURN_IF_ERROR(kernels::SwiGluFp8Forward(act.fp8, gate, up, s));
  } else {
    act.bf16 = View(kAct, t, c.intermediate_size);
    RETURN_IF_ERROR(kernels::SwiGluForward(act.bf16, gate, up, s));
  }
  return Project(act, w.down_proj, f.down_proj, View(kHidden, t, c.hidden_size), 1.f);
}

}  // namespace tandem::models
