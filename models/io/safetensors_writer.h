// Writing safetensors checkpoints the way Hugging Face does: an 8-byte little-endian header
// length, a JSON header padded with spaces to a multiple of 8, then the tensor bytes ordered
// by dtype size (largest first) and name, so every tensor is aligned to its dtype. Files are
// written atomically (temp file + rename). With a shard size limit, tensors are split over
// `model-0000i-of-0000n.safetensors` plus `model.safetensors.index.json`.
//
// Thread-safety: free functions; callers must not write the same path concurrently.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "kernels/core/dtype.h"
#include "runtime/core/status.h"

namespace tandem::models {

struct TensorToWrite {
  std::string name;
  kernels::DType dtype = kernels::DType::kF32;
  std::vector<int64_t> shape;         // row-major; empty for a scalar
  std::span<const std::byte> data;    // numel * dtype size bytes, host memory
};

using SafetensorsMetadata = std::map<std::string, std::string>;

// Writes one file. InvalidArgument on an empty or duplicate name, a negative dimension, or a
// data size that does not match dtype and shape (naming the tensor).
Status WriteSafetensors(const std::string& path, std::span<const TensorToWrite> tensors,
                        const SafetensorsMetadata& metadata = {});

// A safetensors file's bytes without writing them, for writers of their own
// (file_set_writer.h): `header` (the 8-byte length and the padded JSON), then `data`, the
// tensors' bytes in file order (views of the TensorToWrite data). Errors as WriteSafetensors.
struct SafetensorsBytes {
  std::string header;
  std::vector<std::span<const std::byte>> data;
};
Result<SafetensorsBytes> SerializeSafetensors(const std::string& path,
                                              std::span<const TensorToWrite> tensors,
                                              const SafetensorsMetadata& metadata = {});

// Writes `dir`/model.safetensors when everything fits in `max_shard_bytes` of tensor data,
// otherwise shards of at most that many tensor bytes (a larger tensor gets a shard of its
// own) plus the index, whose "metadata" holds `total_size` and the entries of `metadata`.
// Returns the files written, index last.
Result<std::vector<std::string>> WriteShardedSafetensors(
    const std::string& dir, std::span<const TensorToWrite> tensors, int64_t max_shard_bytes,
    const SafetensorsMetadata& metadata = {});

}  // namespace tandem::models
