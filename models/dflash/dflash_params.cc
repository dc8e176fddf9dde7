// Parameter layout and flat buffers of the DFlash drafter (see dflash_params.h).
#include "models/dflash/dflash_params.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "kernels/elementwise/elementwise.h"
#include "kernels/random/philox.h"

namespace tandem::models {

using kernels::DType;
using kernels::Shape;
using kernels::Tensor;
using kernels::TensorView;

int64_t DFlashParamSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

int64_t AlignUp(int64_t x) { return (x + kDFlashParamAlign - 1) / kDFlashParamAlign * kDFlashParamAlign; }

void Add(DFlashParamLayout* l, std::string name, std::vector<int64_t> shape, bool is_norm,
         bool align = true, DFlashParamInit init = DFlashParamInit::kUniform) {
  if (align) l->total = AlignUp(l->total);
  if (is_norm && init == DFlashParamInit::kUniform) init = DFlashParamInit::kOnes;
  DFlashParamSpec s{std::move(name), std::move(shape), l->total, is_norm, init};
  l->total += s.numel();
  l->specs.push_back(std::move(s));
}

}  // namespace

DFlashParamLayout MakeDFlashParamLayout(const DFlashConfig& c) {
  const TransformerConfig& t = c.layers;
  const int64_t h = t.hidden_size, d = t.head_dim, i_dim = t.intermediate_size;
  const int64_t k = static_cast<int64_t>(c.target_layer_ids.size());
  const std::optional<DFlash2Extension>& d2 = c.dflash2;
  const int64_t taps = d2 ? d2->conv_kernel_size : 0;
  const int64_t conv_rows = d2 ? 2 * taps * d2->conv_groups(h) : 0;
  constexpr auto kZeros = DFlashParamInit::kZeros;
  DFlashParamLayout l;
  for (int64_t i = 0; i < t.num_hidden_layers; ++i) {
    const std::string p = fmt::format("layers.{}.", i);
    Add(&l, p + "self_attn.q_proj.weight", {t.num_attention_heads * d, h}, false);
    Add(&l, p + "self_attn.k_proj.weight", {t.num_key_value_heads * d, h}, false);
    Add(&l, p + "self_attn.v_proj.weight", {t.num_key_value_heads * d, h}, false);
    Add(&l, p + "self_attn.o_proj.weight", {h, t.num_attention_heads * d}, false);
    Add(&l, p + "mlp.gate_proj.weight", {i_dim, h}, false);
    Add(&l, p + "mlp.up_proj.weight", {i_dim, h}, false, /*align=*/false);
    Add(&l, p + "mlp.down_proj.weight", {h, i_dim}, false);
    if (d2) {
      Add(&l, p + "attention_conv.kernel_projection.weight", {conv_rows, h}, false, true, kZeros);
      Add(&l, p + "mlp_conv.kernel_projection.weight", {conv_rows, h}, false, true, kZeros);
    }
  }
  Add(&l, "fc.weight", {h, k * h}, false);
  if (d2) {
    const int64_t r = d2->selector_rank, v = t.vocab_size;
    Add(&l, "candidate_selector.hidden_projection.weight", {r, h}, false);
    Add(&l, "candidate_selector.predecessor_codebook", {v, r}, false);
    Add(&l, "candidate_selector.successor_codebook", {v, r}, false, true, kZeros);
  }
  l.total = AlignUp(l.total);
  l.matrix_count = l.total;
  for (int64_t i = 0; i < t.num_hidden_layers; ++i) {
    const std::string p = fmt::format("layers.{}.", i);
    Add(&l, p + "input_layernorm.weight", {h}, true);
    Add(&l, p + "post_attention_layernorm.weight", {h}, true);
    Add(&l, p + "self_attn.q_norm.weight", {d}, true);
    Add(&l, p + "self_attn.k_norm.weight", {d}, true);
    if (d2) {
      for (const char* conv : {"attention_conv", "mlp_conv"})
        Add(&l, p + conv + ".base_kernel", {2, taps, h}, true, true,
            DFlashParamInit::kConvIdentity);
    }
  }
  Add(&l, "hidden_norm.weight", {h}, true);
  Add(&l, "norm.weight", {h}, true);
  l.total = AlignUp(l.total);
  return l;
}

std::vector<DFlashUpdateRange> DFlashUpdateRanges(const DFlashParamLayout& layout,
                                                  int64_t num_layers) {
  auto offset_of = [&](const std::string& name) -> int64_t {
    for (const DFlashParamSpec& s : layout.specs)
      if (s.name == name) return s.offset;
    TANDEM_CHECK_MSG(false, "DFlash layout has no {}", name);
    return -1;
  };
  const int64_t fc = offset_of("fc.weight");
  std::vector<DFlashUpdateRange> out;
  out.push_back({fc, layout.matrix_count, true, 0});
  out.push_back({layout.matrix_count, layout.total, false, 0});
  for (int64_t l = 0; l < num_layers; ++l) {
    const int64_t lo = offset_of(fmt::format("layers.{}.self_attn.q_proj.weight", l));
    const int64_t hi =
        l + 1 < num_layers ? offset_of(fmt::format("layers.{}.self_attn.q_proj.weight", l + 1))
                           : fc;
    out.push_back({lo, hi, true, static_cast<int>(1 + l)});
  }
  return out;
}

TensorView ViewSpec(const DFlashParamSpec& s, const TensorView& flat) {
  TensorView v = flat.Narrow(0, s.offset, s.numel());
  return v.Reshape(Shape::FromArray(s.shape.data(), static_cast<int>(s.shape.size())));
}

DFlashParamViews ViewDFlashParams(const DFlashParamLayout& layout, const DFlashConfig& c,
                                  const TensorView& flat) {
  const int64_t n_layers = c.layers.num_hidden_layers;
  DFlashParamViews v;
  v.layers.resize(n_layers);
  size_t idx = 0;
  auto next = [&] { return ViewSpec(layout.specs[idx++], flat); };
  for (int64_t i = 0; i < n_layers; ++i) {
    DFlashLayerParams& p = v.layers[i];
    p.q_proj = next();
    p.k_proj = next();
    p.v_proj = next();
    p.o_proj = next();
    const DFlashParamSpec& gate = layout.specs[idx];
    p.gate_up = flat.Narrow(0, gate.offset, 2 * gate.numel())
                    .Reshape(Shape{2 * gate.shape[0], gate.shape[1]});
    idx += 2;
    p.down_proj = next();
    if (c.dflash2) {
      p.attn_conv_proj = next();
      p.mlp_conv_proj = next();
    }
  }
  v.fc = next();
  if (c.dflash2) {
    v.sel_proj = next();
    v.sel_pred = next();
    v.sel_succ = next();
  }
  for (int64_t i = 0; i < n_layers; ++i) {
    DFlashLayerParams& p = v.layers[i];
    p.input_norm = next();
    p.post_norm = next();
    p.q_norm = next();
    p.k_norm = next();
    if (c.dflash2) {
      p.attn_conv_base = next();
      p.mlp_conv_base = next();
    }
  }
  v.hidden_norm = next();
  v.norm = next();
  return v;
}

Result<DFlashParams> DFlashParams::Create(const DFlashConfig& c, kernels::Allocator& alloc,
                                          kernels::Stream s) {
  DFlashParams p;
  p.layout = MakeDFlashParamLayout(c);
  const Shape flat{p.layout.total};
  ASSIGN_OR_RETURN(p.master, Tensor::Zeros(alloc, DType::kF32, flat, s));
  ASSIGN_OR_RETURN(p.compute, Tensor::Zeros(alloc, DType::kBF16, flat, s));
  ASSIGN_OR_RETURN(p.grads, Tensor::Zeros(alloc, DType::kF32, flat, s));
  ASSIGN_OR_RETURN(p.adam_m, Tensor::Zeros(alloc, DType::kF32, flat, s));
  ASSIGN_OR_RETURN(p.adam_v, Tensor::Zeros(alloc, DType::kF32, flat, s));
  ASSIGN_OR_RETURN(p.step, Tensor::Zeros(alloc, DType::kI32, Shape{1}, s));
  p.w = ViewDFlashParams(p.layout, c, p.compute);
  p.g = ViewDFlashParams(p.layout, c, p.grads);
  return p;
}

int64_t DFlashParams::DeviceBytes(const DFlashParamLayout& layout) {
  return layout.total * (4 * DTypeSize(DType::kF32) + DTypeSize(DType::kBF16)) +
         DTypeSize(DType::kI32);
}

Status DFlashParams::InitFromScratch(uint64_t seed, kernels::Stream s) {
  const float a = 0.02f * std::sqrt(3.0f);
  // Padding between tensors stays zero (as Create made it), so checkpoints, which hold only
  // the tensors, restore the flat buffers bit for bit.
  for (size_t i = 0; i < layout.specs.size(); ++i) {
    const DFlashParamSpec& spec = layout.specs[i];
    if (spec.is_norm) continue;
    const TensorView dst = master.view().Narrow(0, spec.offset, spec.numel());
    if (spec.init == DFlashParamInit::kZeros) {
      RETURN_IF_ERROR(kernels::FillZero(dst, s));
      continue;
    }
    RETURN_IF_ERROR(kernels::PhiloxUniformFill(dst, -a, a, seed, /*offset=*/i, s));
  }
  // The tail (norm weights, base kernels) is small: written from the host.
  const int64_t n_norm = layout.total - layout.matrix_count;
  std::vector<float> ones(n_norm, 0.0f);
  for (const DFlashParamSpec& spec : layout.specs) {
    if (!spec.is_norm) continue;
    float* dst = ones.data() + (spec.offset - layout.matrix_count);
    if (spec.init == DFlashParamInit::kOnes) {
      std::fill_n(dst, spec.numel(), 1.0f);
    } else if (spec.init == DFlashParamInit::kConvIdentity) {  // [2, K, H]: tap 0 = 1
      const int64_t taps = spec.shape[1], h = spec.shape[2];
      for (int64_t side = 0; side < 2; ++side) std::fill_n(dst + side * taps * h, h, 1.0f);
    }
  }
  RETURN_IF_ERROR(kernels::CopyFromHost(master.view().Narrow(0, layout.matrix_count, n_norm),
                                        ones.data(), s));
  RETURN_IF_ERROR(kernels::FillZero(adam_m, s));
  RETURN_IF_ERROR(kernels::FillZero(adam_v, s));
  RETURN_IF_ERROR(kernels::FillZero(grads, s));
  RETURN_IF_ERROR(kernels::FillZero(step, s));
  // A copy from pageable memory is staged before CopyFromHost returns, so `ones` may go.
  return SyncCompute(s);
}

Status DFlashParams::SyncCompute(kernels::Stream s) { return kernels::Cast(compute, master, s); }

}  // namespace tandem::models
