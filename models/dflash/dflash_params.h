// Parameters of the DFlash drafter, carved from flat allocations so that one all-reduce
// (and one AdamW launch per weight-decay group) covers all of them.
//
// Layout of every flat buffer (fp32 master, bf16 compute copy, fp32 grads, AdamW m and v):
//   [ matrices (weight decay) | norm weights (no weight decay) ]
// matrices, per layer i: q_proj [hq*d, H], k_proj [hk*d, H], v_proj [hk*d, H],
//   o_proj [H, hq*d], gate_proj [I, H], up_proj [I, H] (adjacent: one fused [2I, H] GEMM),
//   down_proj [H, I]; then fc [H, k*H].
// norms, per layer i: input_layernorm [H], post_attention_layernorm [H], q_norm [d],
//   k_norm [d]; then hidden_norm [H], norm [H].
// A DFlash2 drafter (config.dflash2, docs/dflash2.md) adds, K taps, G = H / conv_group_size
// groups, r = selector_rank, V = vocab_size:
//   matrices, per layer after down_proj: attention_conv.kernel_projection [2*K*G, H],
//     mlp_conv.kernel_projection [2*K*G, H]; after fc: candidate_selector.hidden_projection
//     [r, H], candidate_selector.predecessor_codebook [V, r],
//     candidate_selector.successor_codebook [V, r] (z-lab's names: no `.weight` on the
//     codebooks);
//   no weight decay, per layer after k_norm: attention_conv.base_kernel [2, K, H],
//     mlp_conv.base_kernel [2, K, H].
// Names are the HF checkpoint keys (docs/architecture.md). Every tensor starts at a multiple of
// kDFlashParamAlign elements except up_proj, which directly follows gate_proj.
//
// Thread-safety: DFlashParams is owned by one thread (the drafter's); the layout functions
// are pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/core/memory.h"
#include "kernels/core/tensor.h"
#include "models/dflash/dflash_config.h"
#include "runtime/core/status.h"

namespace tandem::models {

inline constexpr int64_t kDFlashParamAlign = 64;

// How InitFromScratch fills a tensor.
enum class DFlashParamInit {
  kUniform,       // std 0.02 (the matrices)
  kOnes,          // norm weights
  kZeros,         // DFlash2's kernel projections and successor codebook
  kConvIdentity,  // DFlash2's base_kernel [2, K, H]: tap 0 = 1 on both sides, others 0
};

struct DFlashParamSpec {
  std::string name;            // HF key, e.g. "layers.0.self_attn.q_proj.weight"
  std::vector<int64_t> shape;  // [out, in] for matrices, [n] for norms
  int64_t offset = 0;          // elements into the flat buffer
  bool is_norm = false;        // in the tail without weight decay (norms, base kernels)
  DFlashParamInit init = DFlashParamInit::kUniform;
  int64_t numel() const;
};

struct DFlashParamLayout {
  std::vector<DFlashParamSpec> specs;  // in buffer order
  int64_t total = 0;                   // elements of a flat buffer
  int64_t matrix_count = 0;            // elements [0, matrix_count) get weight decay
};

// REQUIRES: a config accepted by ParseDFlashConfig (qwen3 layers, k >= 1 target layers).
DFlashParamLayout MakeDFlashParamLayout(const DFlashConfig& c);

// Views of one flat buffer (any dtype) as the drafter's named tensors.
struct DFlashLayerParams {
  kernels::TensorView q_proj, k_proj, v_proj, o_proj;  // [out, in]
  kernels::TensorView gate_up;                         // [2I, H] = gate_proj ; up_proj
  kernels::TensorView down_proj;                       // [H, I]
  kernels::TensorView input_norm, post_norm;           // [H]
  kernels::TensorView q_norm, k_norm;                  // [d]
  // DFlash2 only (empty views for DFlash): base_kernel [2, K, H], kernel_projection
  // [2*K*G, H] of the convolution around attention and around the MLP.
  kernels::TensorView attn_conv_base, attn_conv_proj, mlp_conv_base, mlp_conv_proj;
};
struct DFlashParamViews {
  std::vector<DFlashLayerParams> layers;
  kernels::TensorView fc;           // [H, k*H]
  kernels::TensorView hidden_norm;  // [H]
  kernels::TensorView norm;         // [H]
  // DFlash2 only (empty for DFlash): the candidate selector.
  kernels::TensorView sel_proj;  // hidden_projection [r, H]
  kernels::TensorView sel_pred;  // predecessor_codebook [V, r]
  kernels::TensorView sel_succ;  // successor_codebook [V, r]
};
// REQUIRES: flat is a contiguous [layout.total] view.
DFlashParamViews ViewDFlashParams(const DFlashParamLayout& layout, const DFlashConfig& c,
                                  const kernels::TensorView& flat);
// The view of spec `s` inside `flat`, shaped as the spec.
kernels::TensorView ViewSpec(const DFlashParamSpec& s, const kernels::TensorView& flat);

// One contiguous range of the flat buffers that the optimizer updates with one AdamW launch.
struct DFlashUpdateRange {
  int64_t lo = 0, hi = 0;  // elements [lo, hi)
  bool weight_decay = false;
  int group = 0;  // 0: fc and every norm weight; 1 + l: layer l's matrices
};
// The optimizer's ranges in the order the next forward reads them: group 0 (fc, whose
// range ends at matrix_count, then the norm tail [matrix_count, total)), then each layer's
// matrices [first of layer l, first of layer l+1 or fc). They tile [0, total) exactly once,
// with weight decay on exactly [0, matrix_count). REQUIRES: a layout of MakeDFlashParamLayout.
std::vector<DFlashUpdateRange> DFlashUpdateRanges(const DFlashParamLayout& layout,
                                                  int64_t num_layers);

// The flat buffers plus the AdamW step counter, all on one device.
struct DFlashParams {
  DFlashParamLayout layout;
  kernels::Tensor master;   // f32 [N]
  kernels::Tensor compute;  // bf16 [N] = bf16(master), what the forward reads
  kernels::Tensor grads;    // f32 [N]
  kernels::Tensor adam_m;   // f32 [N]
  kernels::Tensor adam_v;   // f32 [N]
  kernels::Tensor step;     // i32 [1], optimizer steps taken (skipped steps not counted)
  DFlashParamViews w;       // views of `compute`
  DFlashParamViews g;       // views of `grads`

  // Allocates everything, zero-filled (padding between tensors stays zero for good).
  static Result<DFlashParams> Create(const DFlashConfig& c, kernels::Allocator& alloc,
                                     kernels::Stream s);
  // The bytes Create allocates for `layout`: master, grads, m, v in f32 and the bf16 compute
  // copy (18 per element), and the step counter.
  static int64_t DeviceBytes(const DFlashParamLayout& layout);
  // From-scratch init as the public trainers do (HF Qwen3 `_init_weights`): matrices with
  // std 0.02 (drawn uniform(-0.02*sqrt(3), 0.02*sqrt(3)) with Philox on the device, which
  // has that std and is fast at 8B scale), norm weights 1. DFlash2 (SpecForge's
  // DFlash2DraftModel init): base kernels the identity, kernel projections 0 (a fresh layer
  // computes what a DFlash layer does), hidden_projection and predecessor_codebook std 0.02,
  // successor_codebook 0 (the selector starts as a no-op; the successor codebook gets the
  // first gradient). Resets m, v and step.
  Status InitFromScratch(uint64_t seed, kernels::Stream s);
  // Sets compute = bf16(master) (after master was written directly).
  Status SyncCompute(kernels::Stream s);
};

}  // namespace tandem::models
