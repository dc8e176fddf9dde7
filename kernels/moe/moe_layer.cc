// MoeLayer (kernels/moe/moe_layer.h): buffers and the block's op sequence.
#include "kernels/moe/moe_layer.h"

#include <algorithm>

#include "kernels/core/stream.h"
#include "kernels/elementwise/row_gather.h"
#include "kernels/mlp/swiglu.h"
#include "kernels/moe/combine.h"
#include "kernels/moe/routing.h"

namespace tandem::kernels {
namespace {

constexpr int64_t kAlign = 256;  // bytes

struct Slot {
  TensorView* view;
  DType dtype;
  int64_t rows, cols;  // cols 0: a vector of `rows` elements
};

// The slots of a MoeLayer for max_tokens rows, in allocation order; `views` may hold nulls
// (sizing only).
std::vector<Slot> Slots(const MoeLayerShape& s, int64_t max_tokens, std::vector<TensorView*> v) {
  const int64_t t = max_tokens, n = t * s.top_k;
  // Both layouts of the expert rows fit (MoeFp8BufferRows is the same count); the FP8 shared
  // expert's GEMMs write Fp8PaddedRows rows.
  const int64_t p = s.fp8 ? std::max(MoeExpertBufferRows(n), MoeFp8BufferRows(n))
                          : MoeExpertBufferRows(n);
  const int64_t ts = s.fp8 ? Fp8PaddedRows(t) : t;
  std::vector<Slot> slots = {
      {v[0], DType::kF32, t, s.experts},         {v[1], DType::kI32, t, s.top_k},
      {v[2], DType::kF32, t, s.top_k},           {v[3], DType::kI32, s.experts + 1, 0},
      {v[4], DType::kI32, n, 0},                 {v[5], DType::kI32, n, 0},
      {v[6], DType::kBF16, p, s.hidden},         {v[7], DType::kBF16, p, 2 * s.expert_size},
      {v[8], DType::kBF16, p, s.expert_size},    {v[9], DType::kI32, p, 0},
      {v[10], DType::kI32, n, 0}};
  if (s.shared_size > 0) {
    slots.push_back({v[11], DType::kBF16, ts, 2 * s.shared_size});
    slots.push_back({v[12], DType::kBF16, ts, s.shared_size});
    slots.push_back({v[13], DType::kBF16, ts, s.hidden});
    slots.push_back({v[14], DType::kF32, t, 0});
  }
  if (s.fp8)
    slots.push_back({v[15], DType::kU8,
                     MoeFp8WorkspaceBytes(n, s.hidden, std::max(s.expert_size, s.shared_size)),
                     0});
  return slots;
}

int64_t Layout(const std::vector<Slot>& slots, std::vector<int64_t>* offsets) {
  int64_t total = 0;
  for (const Slot& s : slots) {
    total = (total + kAlign - 1) / kAlign * kAlign;
    if (offsets != nullptr) offsets->push_back(total);
    total += s.rows * std::max<int64_t>(s.cols, 1) * DTypeSize(s.dtype);
  }
  return total;
}

}  // namespace

Status MoeLayer::CheckShape(const MoeLayerShape& s) {
  if (s.hidden <= 0 || s.expert_size <= 0 || s.shared_size < 0)
    return InvalidArgumentError("MoeLayer: hidden {}, expert size {} and shared size {} must be "
                                "positive (shared: or 0)", s.hidden, s.expert_size,
                                s.shared_size);
  if (s.experts < 1 || s.experts > kMoeMaxExperts)
    return InvalidArgumentError("MoeLayer: {} experts; 1..{} are supported", s.experts,
                                kMoeMaxExperts);
  if (s.top_k < 1 || s.top_k > s.experts || s.top_k > kMoeMaxTopK)
    return InvalidArgumentError("MoeLayer: top-k {} must be in 1..min(experts {}, {})", s.top_k,
                                s.experts, kMoeMaxTopK);
  return Status::Ok();
}

int64_t MoeLayer::WorkspaceBytes(const MoeLayerShape& shape, int64_t max_tokens) {
  return Layout(Slots(shape, max_tokens, std::vector<TensorView*>(16, nullptr)), nullptr);
}

MoeLayer::~MoeLayer() {
  host_offsets_.Reset();  // before the allocator it came from
}

Result<std::unique_ptr<MoeLayer>> MoeLayer::Create(const MoeLayerShape& shape,
                                                   int64_t max_tokens, Allocator& alloc,
                                                   Stream stream, MoeExpertsPath experts_path) {
  RETURN_IF_ERROR(CheckShape(shape));
  if (max_tokens <= 0)
    return InvalidArgumentError("MoeLayer: max_tokens must be positive, got {}", max_tokens);
  std::unique_ptr<MoeLayer> m(new MoeLayer(shape, max_tokens));
  const std::vector<Slot> slots =
      Slots(shape, max_tokens,
            {&m->logits_, &m->ids_, &m->weights_, &m->offsets_, &m->perm_token_,
             &m->assign_row_, &m->xp_, &m->gate_up_, &m->act_, &m->padded_token_,
             &m->padded_row_, &m->shared_gate_up_,
             &m->shared_act_, &m->shared_out_, &m->shared_logit_, &m->fp8_bytes_});
  std::vector<int64_t> offsets;
  const int64_t total = Layout(slots, &offsets);
  ASSIGN_OR_RETURN(m->workspace_, Tensor::Empty(alloc, DType::kU8, {total}, stream));
  char* base = static_cast<char*>(m->workspace_.data());
  for (size_t i = 0; i < slots.size(); ++i) {
    const Slot& s = slots[i];
    *s.view = s.cols == 0 ? TensorView(base + offsets[i], s.dtype, {s.rows}, alloc.device())
                          : TensorView(base + offsets[i], s.dtype, {s.rows, s.cols},
                                       alloc.device());
  }
  if (shape.fp8) {
    int64_t offset = 0;
    m->fp8_ = CarveMoeFp8Workspace(m->fp8_bytes_.data(), &offset, max_tokens * shape.top_k,
                                   shape.hidden, std::max(shape.expert_size, shape.shared_size),
                                   alloc.device());
  }
  ASSIGN_OR_RETURN(m->experts_, MoeExperts::Create(alloc, shape.experts, experts_path));
  if (alloc.device().is_cuda()) {
    m->pinned_ = std::make_unique<PinnedAllocator>();
    ASSIGN_OR_RETURN(m->host_offsets_,
                     Tensor::Empty(*m->pinned_, DType::kI32, {shape.experts + 1}));
  }
  return m;
}

Status MoeLayer::CheckWeights(const MoeLayerWeights& w) const {
  const MoeLayerShape& s = shape_;
  const auto expect = [](const char* what, const TensorView& v, const Shape& shape) -> Status {
    if (v.dtype() != DType::kBF16 || !(v.shape() == shape) || !v.is_contiguous())
      return InvalidArgumentError("MoeLayer: {} must be a contiguous bf16 {}, got {}", what,
                                  shape.ToString(), v.ToString());
    return Status::Ok();
  };
  RETURN_IF_ERROR(expect("router", w.router, {s.experts, s.hidden}));
  if (s.fp8) {
    if (s.shared_size > 0) RETURN_IF_ERROR(expect("shared gate", w.shared_gate, {1, s.hidden}));
    return CheckFp8Weights(w);
  }
  RETURN_IF_ERROR(expect("experts' gate_up", w.experts.gate_up,
                         {s.experts, 2 * s.expert_size, s.hidden}));
  RETURN_IF_ERROR(expect("experts' down", w.experts.down, {s.experts, s.hidden, s.expert_size}));
  if (s.shared_size > 0) {
    RETURN_IF_ERROR(expect("shared gate_up", w.shared_gate_up, {2 * s.shared_size, s.hidden}));
    RETURN_IF_ERROR(expect("shared down", w.shared_down, {s.hidden, s.shared_size}));
    RETURN_IF_ERROR(expect("shared gate", w.shared_gate, {1, s.hidden}));
  }
  return Status::Ok();
}

Status MoeLayer::CheckFp8Weights(const MoeLayerWeights& w) const {
  constexpr const char* kOp = "MoeLayer (fp8)";
  const MoeLayerShape& s = shape_;
  RETURN_IF_ERROR(CheckMoeFp8Experts(kOp, w.experts8));
  if (!(w.experts8.gate_up.shape() == Shape{s.experts, 2 * s.expert_size, s.hidden}))
    return InvalidArgumentError("{}: fp8 experts {} must be [{}, {}, {}]", kOp,
                                w.experts8.gate_up.ToString(), s.experts, 2 * s.expert_size,
                                s.hidden);
  if (s.shared_size > 0) {
    RETURN_IF_ERROR(CheckFp8Weight(kOp, w.shared_gate_up8));
    RETURN_IF_ERROR(CheckFp8Weight(kOp, w.shared_down8));
    if (w.shared_gate_up8.rows() != 2 * s.shared_size || w.shared_gate_up8.cols() != s.hidden ||
        w.shared_down8.rows() != s.hidden || w.shared_down8.cols() != s.shared_size)
      return InvalidArgumentError("{}: fp8 shared expert {} / {} must be [{}, {}] / [{}, {}]",
                                  kOp, w.shared_gate_up8.data.ToString(),
                                  w.shared_down8.data.ToString(), 2 * s.shared_size, s.hidden,
                                  s.hidden, s.shared_size);
  }
  return Status::Ok();
}

Status MoeLayer::SharedExpert(GemmContext* gemm, const MoeLayerWeights& w, const TensorView& x,
                              Stream stream) {
  GemmOptions linear;
  linear.trans_b = true;
  const int64_t t = x.dim(0);
  if (!shape_.fp8) {
    const TensorView gu = shared_gate_up_.Narrow(0, 0, t), act = shared_act_.Narrow(0, 0, t);
    RETURN_IF_ERROR(Gemm(gemm, x, w.shared_gate_up, gu, linear, stream));
    const auto [gate, up] = SplitGateUp(gu);
    RETURN_IF_ERROR(SwiGluForward(act, gate, up, stream));
    return Gemm(gemm, act, w.shared_down, shared_out_.Narrow(0, 0, t), linear, stream);
  }
  // FP8: x and act quantized into the expert path's code buffer (free by now) and its block
  // scales (apart from the row scales the combine reads), each GEMM writing Fp8PaddedRows(t)
  // rows.
  const int64_t tp = Fp8PaddedRows(t), is = shape_.shared_size;
  const TensorView gu = shared_gate_up_.Narrow(0, 0, tp), act = shared_act_.Narrow(0, 0, tp);
  const Fp8GroupActivation xh{fp8_.Codes(shape_.hidden).Narrow(0, 0, tp), fp8_.BlockScale()};
  RETURN_IF_ERROR(QuantizeFp8Activation(x, xh, stream));
  RETURN_IF_ERROR(Fp8Gemm(gemm, xh, w.shared_gate_up8, gu, linear, stream));
  const auto [gate, up] = SplitGateUp(gu.Narrow(0, 0, t));
  RETURN_IF_ERROR(SwiGluForward(act.Narrow(0, 0, t), gate, up, stream));
  const Fp8GroupActivation ah{fp8_.Codes(is).Narrow(0, 0, tp), fp8_.BlockScale()};
  RETURN_IF_ERROR(QuantizeFp8Activation(act.Narrow(0, 0, t), ah, stream));
  return Fp8Gemm(gemm, ah, w.shared_down8, shared_out_.Narrow(0, 0, tp), linear, stream);
}

Status MoeLayer::Forward(GemmContext* gemm, const MoeLayerWeights& w, const TensorView& x,
                         const TensorView& hidden, Stream stream) {
  RETURN_IF_ERROR(CheckWeights(w));
  const int64_t t = x.ndim() == 2 ? x.dim(0) : -1, k = shape_.top_k;
  if (t < 1 || t > max_tokens_ || !(x.shape() == Shape{t, shape_.hidden}) ||
      !(hidden.shape() == x.shape()))
    return InvalidArgumentError("MoeLayer::Forward: x {} and hidden {} must be [T, {}] with T in "
                                "1..{}", x.ToString(), hidden.ToString(), shape_.hidden,
                                max_tokens_);
  NvtxRange range("MoeLayer::Forward");
  GemmOptions linear;
  linear.trans_b = true;
  const TensorView logits = logits_.Narrow(0, 0, t), ids = ids_.Narrow(0, 0, t),
                   weights = weights_.Narrow(0, 0, t);
  const TensorView perm_token = perm_token_.Narrow(0, 0, t * k),
                   assign_row = assign_row_.Narrow(0, 0, t * k);
  RETURN_IF_ERROR(Gemm(gemm, x, w.router, logits, linear, stream));
  RETURN_IF_ERROR(MoeRouterForward(ids, weights, logits, shape_.normalize, stream));
  RETURN_IF_ERROR(MoePermute(offsets_, perm_token, assign_row, ids, stream));
  std::span<const int32_t> offsets;
  if (x.device().is_cuda()) {
    RETURN_IF_ERROR(CopyToHost(host_offsets_.data(), offsets_, stream));
    RETURN_IF_ERROR(SynchronizeStream(x.device(), stream));
    offsets = {host_offsets_.view().data_as<const int32_t>(),
               static_cast<size_t>(shape_.experts + 1)};
  } else {
    offsets = {offsets_.data_as<const int32_t>(), static_cast<size_t>(shape_.experts + 1)};
  }
  // y reuses xp's rows: xp is read only by the gate_up GEMMs, which run before any down GEMM.
  TensorView rows = assign_row;
  const bool padded = experts_->Resolve(offsets) == MoeExpertsPath::kPadded;
  if (padded) {
    const int64_t cap = MoeExpertCapacity(offsets), rows_padded = shape_.experts * cap;
    rows = padded_row_.Narrow(0, 0, t * k);
    const TensorView padded_token = padded_token_.Narrow(0, 0, rows_padded);
    RETURN_IF_ERROR(MoePadLayout(padded_token, rows, offsets_, perm_token, assign_row, ids, cap,
                                 stream));
    if (shape_.fp8) {  // the gather is fused with the quantization
      RETURN_IF_ERROR(MoeFp8ExpertsForwardPadded(gemm, w.experts8, offsets, offsets_, cap, fp8_,
                                                 x, padded_token, gate_up_, xp_, stream,
                                                 /*rescale=*/false));
    } else {
      RETURN_IF_ERROR(RowGather(xp_.Narrow(0, 0, rows_padded), padded_token, x, stream));
      RETURN_IF_ERROR(experts_->ForwardPadded(gemm, w.experts, offsets, cap, xp_, gate_up_,
                                              act_, xp_, stream));
    }
    last_path_ = MoeExpertsPath::kPadded;
  } else if (shape_.fp8) {
    RETURN_IF_ERROR(RowGather(xp_.Narrow(0, 0, t * k), perm_token, x, stream));
    RETURN_IF_ERROR(MoeFp8ExpertsForward(gemm, w.experts8, offsets, offsets_, fp8_, xp_,
                                         gate_up_, xp_, stream, /*rescale=*/false));
    last_path_ = MoeExpertsPath::kLoop;
  } else {
    RETURN_IF_ERROR(RowGather(xp_.Narrow(0, 0, t * k), perm_token, x, stream));
    RETURN_IF_ERROR(
        experts_->Forward(gemm, w.experts, offsets, xp_, gate_up_, act_, xp_, stream));
    last_path_ = experts_->last_path();
  }
  MoeCombineArgs combine{hidden, hidden, xp_, rows, weights, {}, {}, {}, {}, {}};
  if (shape_.fp8) {  // xp_ holds down's raw products: the combine applies their scales
    combine.row_scale = fp8_.ActScale();
    combine.channel_scale = w.experts8.down_scale;
    combine.ids = ids;
  }
  if (shape_.shared_size > 0) {
    RETURN_IF_ERROR(SharedExpert(gemm, w, x, stream));
    combine.shared = shared_out_.Narrow(0, 0, t);
    combine.shared_gate = shared_logit_.Narrow(0, 0, t);
    RETURN_IF_ERROR(Gemm(gemm, x, w.shared_gate, combine.shared_gate.Reshape({t, 1}), linear,
                         stream));
  }
  return MoeCombine(combine, stream);
}

}  // namespace tandem::kernels
