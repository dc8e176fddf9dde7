// Raw launchers of the selector kernels (selector.cu), called by selector_cuda.cc after the
// argument checks. They return the launch's cudaError_t so the .cu file needs no Status.
// Internal to kernels/. Thread-safety: asynchronous on the given stream.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/core/dtype.h"

namespace tandem::kernels::dflash2 {

// The shapes every launcher takes. REQUIRES: 1 <= k <= kSelectorMaxTopK,
// 1 <= rank <= kSelectorMaxRank, ids in [0, vocab).
struct SelectorLaunchDims {
  int64_t rows = 0;
  int k = 0;
  int rank = 0;
  int64_t vocab = 0;
};

// scores f32 [R, k]; proj f32 (proj_bf16 false) or bf16 [R, rank]; pred, succ bf16
// [vocab, rank]; prev i32 [R]; ids i32 [R, k]; unary f32 [R, k].
cudaError_t LaunchSelectorScores(float* scores, const void* proj, bool proj_bf16,
                                 const void* pred, const void* succ, const int32_t* prev,
                                 const int32_t* ids, const float* unary,
                                 const SelectorLaunchDims& d, Stream s);

// loss f32 [1], stats i32 [2], dscores f32 [R, k] (also the partial sums' scratch);
// scores f32 [R, k], ids i32 [R, k], targets i32 [R], weights f32 [R].
cudaError_t LaunchSelectorLoss(float* loss, int32_t* stats, float* dscores, const float* scores,
                               const int32_t* ids, const int32_t* targets, const float* weights,
                               float scale, int64_t rows, int k, Stream s);

// dproj f32 / bf16 [R, rank] (overwritten); dpred, dsucc f32 [vocab, rank] (+=, atomics).
cudaError_t LaunchSelectorScoresBackward(void* dproj, bool dproj_bf16, float* dpred, float* dsucc,
                                         const float* dscores, const void* proj, bool proj_bf16,
                                         const void* pred, const void* succ, const int32_t* prev,
                                         const int32_t* ids, const SelectorLaunchDims& d,
                                         Stream s);

// dhidden bf16 [R, hidden] (+=); dunary, values f32 [R, k]; ids i32 [R, k]; lm_head bf16
// [vocab, hidden].
cudaError_t LaunchCandidateHeadBackward(void* dhidden, const float* dunary, const float* values,
                                        const int32_t* ids, const void* lm_head,
                                        float multiplier, float softcap, int64_t rows, int k,
                                        int64_t hidden, Stream s);

// path i32 [R]; probs f32 [R, k] or nullptr (greedy); anchors i32 [R / block_rows].
struct SelectorWalkArgs {
  int32_t* path = nullptr;
  float* probs = nullptr;
  const void* proj = nullptr;
  bool proj_bf16 = false;
  const void* pred = nullptr;
  const void* succ = nullptr;
  const int32_t* ids = nullptr;
  const float* unary = nullptr;
  const int32_t* anchors = nullptr;
  int64_t block_rows = 1;
  float temperature = 1.f;
  uint64_t seed = 0, offset = 0;
};
cudaError_t LaunchSelectorWalk(const SelectorWalkArgs& a, const SelectorLaunchDims& d, Stream s);

}  // namespace tandem::kernels::dflash2
