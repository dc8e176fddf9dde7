// The routed experts' SwiGLU MLPs over the permuted token copies (kernels/moe/routing.h):
// for each expert e with rows [o_e, o_e+1) of x,
//   gate_up = x[rows] W_gu[e]^T  (W_gu [E, 2I, H]: gate rows first, as transformers fuses them)
//   act     = silu(gate) * up
//   y[rows] = act W_down[e]^T    (W_down [E, H, I])
//
// Every version needs the expert offsets on the host (the caller copies them once per layer:
// its one host sync), since each expert's GEMM has its own row count.
//
// MoeExpertsForward is the per-expert loop: one cuBLASLt GEMM per expert and projection,
// one after the other on `s`. It is the CPU reference twin (cpu::Gemm on exactly each
// expert's rows) and the CUDA fallback.
//
// MoeExperts owns what the faster versions need and runs one of (MoeExpertsPath):
//   kPadded:  the capacity-padded layout: every expert owns cap = MoeExpertCapacity rows
//             (its rows first, then padding; the caller lays the rows out so, with
//             MoePadLayout of routing.h), and each projection is one strided-batched cuBLAS
//             GEMM over all E experts (ForwardPadded). Only where the padding is small:
//             E cap <= MoeExpertBufferRows(N) (the rule below);
//   kGrouped: one cublasGemmGroupedBatchedEx call per projection, one group per expert with
//             tokens (exact row counts), its pointer arrays staged through pinned memory: the
//             fallback where the padding would be large (skewed routing, few tokens);
//   kLoop:    MoeExpertsForward.
// The rule (MoeChooseExpertsPath, what kAuto runs): one expert with rows: kLoop; else kPadded
// when it fits, else kGrouped. Measured on an H200 at the Qwen3.6-35B-A3B expert shape
// (bench/RESULTS.md): kPadded 2x as fast as kGrouped, kGrouped 1.4-2.4x as fast as kLoop.
// On the CPU every path is the loop (kPadded: over each expert's rows of the padded layout).
//
// Row buckets (kLoop on CUDA): each expert's GEMM runs on MoeBucketRows(n) rows
// instead of n, so the GEMM plan cache (keyed by shape) sees a few dozen row counts instead
// of every count. The extra rows read past the expert's range and write into the next
// experts' rows, which those experts overwrite afterwards (experts run in increasing order),
// or into the padding at the end: x, gate_up, act and y need MoePaddedRows(N) rows, and rows
// past N hold garbage. kGrouped reads and writes exactly each expert's rows.
// On the CPU each GEMM runs on exactly n rows.
//
// Thread-safety: MoeExpertsForward is stateless, ordered on `s` (the GemmContext's rules
// apply). A MoeExperts is thread-compatible: one Forward at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include "kernels/core/memory.h"
#include "kernels/core/tensor.h"
#include "kernels/gemm/gemm.h"

namespace tandem::kernels {

struct MoeExpertWeights {
  TensorView gate_up;  // bf16 [E, 2I, H]
  TensorView down;     // bf16 [E, H, I]
};

// n rounded up to a multiple of max(16, 2^(bit_width(n) - 4)): fewer than n/8 + 16 extra rows.
int64_t MoeBucketRows(int64_t n);
// Rows the permuted buffers need for `assignments` token copies on CUDA.
int64_t MoePaddedRows(int64_t assignments);

// offsets: host i32 [E + 1] (non-decreasing, offsets[0] == 0); x bf16 [P, H]; gate_up bf16
// [P, 2I]; act bf16 [P, I]; y bf16 [P, H] (y may be x: x is read only before y is written);
// P >= MoePaddedRows(offsets[E]) on CUDA, >= offsets[E] on the CPU.
Status MoeExpertsForward(GemmContext* gemm, const MoeExpertWeights& w,
                         std::span<const int32_t> offsets, const TensorView& x,
                         const TensorView& gate_up, const TensorView& act, const TensorView& y,
                         Stream s);

enum class MoeExpertsPath { kAuto, kLoop, kGrouped, kPadded };
const char* MoeExpertsPathName(MoeExpertsPath path);

// Rows per expert of the padded layout: the most rows of an expert (offsets: host i32
// [E + 1]), rounded up to a multiple of 16.
int64_t MoeExpertCapacity(std::span<const int32_t> offsets);
// Rows of the permuted buffers that serve every path for `assignments` token copies:
// N + N/2 + 64 (>= MoePaddedRows(N)); kPadded runs when E * cap fits in them.
int64_t MoeExpertBufferRows(int64_t assignments);
// The path kAuto runs for these offsets: kLoop with at most one expert holding rows; kPadded
// when E * MoeExpertCapacity <= MoeExpertBufferRows(N); else kGrouped.
MoeExpertsPath MoeChooseExpertsPath(std::span<const int32_t> offsets);

class MoeExperts {
 public:
  // For up to `max_experts` experts on alloc's device (a CPU allocator: Forward runs the
  // reference loop whatever the path). Allocates the pointer arrays from `alloc` and, on
  // CUDA, a cuBLAS handle and the pinned staging buffer. Unavailable for a CUDA device in a build without CUDA.
  static Result<std::unique_ptr<MoeExperts>> Create(Allocator& alloc, int64_t max_experts,
                                                    MoeExpertsPath path = MoeExpertsPath::kAuto);
  ~MoeExperts();
  MoeExperts(const MoeExperts&) = delete;
  MoeExperts& operator=(const MoeExperts&) = delete;

  // The path a call with these offsets runs on this object's device: kAuto by the rule;
  // kPadded only where the rule allows it (else kGrouped); on the CPU kGrouped is kLoop.
  MoeExpertsPath Resolve(std::span<const int32_t> offsets) const;

  // MoeExpertsForward's contract (the rows laid out by expert offsets); runs Resolve(offsets),
  // with kGrouped in place of kPadded. `gemm` runs kLoop (the device's context; nullptr on the
  // CPU). E <= max_experts.
  Status Forward(GemmContext* gemm, const MoeExpertWeights& w, std::span<const int32_t> offsets,
                 const TensorView& x, const TensorView& gate_up, const TensorView& act,
                 const TensorView& y, Stream s);
  // kPadded over the padded layout: expert e's rows are [e cap, e cap + count_e) of x, and of
  // gate_up, act and y, which need >= E cap rows (rows of padding hold garbage after);
  // cap >= every count (offsets: host i32 [E + 1], as for Forward). y may be x. `gemm` runs
  // the CPU version (nullptr).
  Status ForwardPadded(GemmContext* gemm, const MoeExpertWeights& w,
                       std::span<const int32_t> offsets, int64_t cap, const TensorView& x,
                       const TensorView& gate_up, const TensorView& act, const TensorView& y,
                       Stream s);

  MoeExpertsPath path() const { return path_; }
  // What the last Forward or ForwardPadded ran.
  MoeExpertsPath last_path() const { return last_path_; }

  struct Impl;  // the CUDA state (experts_cuda.cc)

 private:
  MoeExperts(MoeExpertsPath path, int64_t max_experts);
  MoeExpertsPath path_;
  MoeExpertsPath last_path_ = MoeExpertsPath::kLoop;
  int64_t max_experts_;
  bool cuda_ = false;
  std::unique_ptr<Impl> impl_;  // null on the CPU
};

}  // namespace tandem::kernels
