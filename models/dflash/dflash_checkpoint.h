// HF-style DFlash drafter checkpoints, readable by SGLang/vLLM, plus what exact resume needs:
//   DIR/config.json             DFlashDraftModel config (dflash_config.h)
//   DIR/model.safetensors       bf16 weights, keys as in docs/architecture.md
//                               (`layers.{i}.self_attn...`)
//   DIR/optimizer.safetensors   f32 `master.{key}`, `exp_avg.{key}`, `exp_avg_sq.{key}` and
//                               i32 `step` (AdamW steps taken on the device)
//   DIR/trainer_state.json      (dflash_trainer_state.h) {"format": "tandem-dflash-trainer", "version": 1,
//                                "step": host step, "seed": RNG seed}
// config.json + model.safetensors alone are the servable drafter.
// Anchors and noise are pure functions of (seed, step), so these files restore the RNG too.
//
// Saving comes in two halves for asynchronous checkpoints: CopyDFlashState enqueues a copy
// of the state into host buffers (DFlashHostState, e.g. pinned), WriteDFlashCheckpoint
// writes the files from them on any thread while training goes on.
//
// Thread-safety: SaveDFlashCheckpoint and CopyDFlashState on the drafter's thread (Save
// synchronises its stream); WriteDFlashCheckpoint reads only its arguments, from any thread.
#pragma once

#include <cstdint>
#include <string>

#include "models/dflash/dflash_drafter.h"
#include "models/dflash/dflash_trainer_state.h"
#include "models/io/file_set_writer.h"
#include "runtime/core/status.h"

namespace tandem::models {

// A copy of the training state in host memory: what the four files are made of.
struct DFlashHostState {
  kernels::Tensor weights;  // bf16 [N], the compute copy (model.safetensors)
  kernels::Tensor master;   // f32 [N]
  kernels::Tensor adam_m;   // f32 [N]
  kernels::Tensor adam_v;   // f32 [N]
  kernels::Tensor step;     // i32 [1], AdamW steps taken on the device

  // Host buffers for `layout` from `alloc` (a CPU-device allocator, e.g. PinnedAllocator).
  static Result<DFlashHostState> Allocate(const DFlashParamLayout& layout,
                                          kernels::Allocator& alloc);
  // Bytes Allocate takes for `layout`.
  static int64_t Bytes(const DFlashParamLayout& layout);
};

// Enqueues copies of the drafter's weights, master weights, AdamW moments and step counter
// into `host` on `stream` (the drafter's or one ordered after its work); the caller
// synchronises before reading `host`. On the CPU the copy is done on return.
Status CopyDFlashState(DFlashDrafter& drafter, DFlashHostState& host, kernels::Stream stream);

// Writes all four files from a finished copy (`dir` is created) with WriteFileSet
// (models/io/file_set_writer.h): chunks written in parallel, O_DIRECT where the filesystem
// allows it, each file's XXH3-64 computed from the bytes as they are written, every file
// fsynced before any is renamed into place. Returns the files written with their digests.
Result<std::vector<WrittenFile>> WriteDFlashCheckpoint(
    const std::string& dir, const DFlashConfig& config, const DFlashParamLayout& layout,
    const DFlashHostState& host, const DFlashTrainerState& state,
    const FileSetWriteOptions& io = {});

// Writes all four files as WriteDFlashCheckpoint does: copy, wait, write.
Result<std::vector<WrittenFile>> SaveDFlashCheckpoint(const std::string& dir,
                                                      DFlashDrafter& drafter,
                                                      const DFlashTrainerState& state,
                                                      const FileSetWriteOptions& io = {});

// Loads model.safetensors into the drafter (master = the bf16 weights widened) and resets
// the optimizer. Every key must be present with the drafter's shape (NotFound / DataLoss
// naming file and tensor otherwise); BF16, F16 and F32 files are accepted.
Status LoadDFlashWeights(const std::string& dir, DFlashDrafter& drafter);

// Exact resume: weights, then the fp32 master and AdamW state from optimizer.safetensors,
// and `state` from trainer_state.json (validated, and its step must match the optimizer's
// step tensor). NotFound when either resume file is missing.
Status LoadDFlashCheckpoint(const std::string& dir, DFlashDrafter& drafter,
                            DFlashTrainerState* state);

}  // namespace tandem::models
