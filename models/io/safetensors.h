// Reading safetensors checkpoints: one file, or a sharded set described by
// `model.safetensors.index.json`. Files are memory-mapped read-only; nothing is copied until
// the caller asks. Every header is validated before any byte is trusted (length bounds,
// JSON, dtypes, shapes against byte counts, offsets inside the data region and disjoint,
// index entries against the shard files), so a truncated or corrupt file is an error that
// names the file and the tensor, never a crash or a silent zero.
//
// Thread-safety: a SafetensorsReader is immutable after Open; concurrent reads are safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "kernels/core/dtype.h"
#include "models/io/file_util.h"
#include "runtime/core/status.h"

namespace tandem::models {

using kernels::DType;

// "BF16", "F16", "F32", "I32", "I64", "U8", "F8_E4M3", "F8_E5M2" <-> DType. Other safetensors dtypes (F64,
// BOOL, ...) are InvalidArgument: tandem does not use them.
Result<DType> ParseSafetensorsDType(std::string_view name);
std::string_view SafetensorsDTypeName(DType dtype);

// The largest header tandem accepts (the same bound as the reference implementation).
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100u << 20;

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // row-major; empty for a scalar
  int file_index = 0;          // into SafetensorsReader::files()
  int64_t begin = 0;           // absolute byte offsets in the file
  int64_t end = 0;

  int64_t numel() const;
  int64_t nbytes() const { return end - begin; }
};

class SafetensorsReader {
 public:
  // `path` is a `.safetensors` file, a `*.index.json` index, or a directory holding
  // `model.safetensors.index.json` or `model.safetensors` (the index wins).
  // Errors: NotFound (missing file or shard), DataLoss (corrupt or truncated data, an index
  // that disagrees with its shards), InvalidArgument (unsupported dtype, not a file).
  static Result<SafetensorsReader> Open(const std::string& path);

  // Shard paths, in the order their tensors are listed.
  const std::vector<std::string>& files() const { return file_paths_; }
  // All tensors, ordered by (file_index, begin): the order that reads each file once,
  // front to back.
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  // `__metadata__` of a single file, or the index's "metadata" strings.
  const std::map<std::string, std::string>& metadata() const { return metadata_; }

  // nullptr when absent.
  const TensorInfo* Find(std::string_view name) const;
  Result<const TensorInfo*> Get(std::string_view name) const;

  // The tensor's bytes inside the map; valid while the reader lives. No alignment is
  // promised beyond what the file gives (HF writers align every tensor to its dtype).
  std::span<const std::byte> Bytes(const TensorInfo& t) const;

  // Copies the tensor into `dst` (dst_bytes long) as `out`: same dtype copies raw; BF16,
  // F16 and F32 convert to F32 or BF16 (rounding to nearest even). InvalidArgument on a
  // size mismatch or an unsupported conversion, naming the tensor.
  Status Read(const TensorInfo& t, DType out, void* dst, int64_t dst_bytes) const;
  Status Read(std::string_view name, DType out, void* dst, int64_t dst_bytes) const;

  // Calls fn(tensor, bytes) for every tensor in file order (one sequential pass per file,
  // with read-ahead), e.g. to upload a checkpoint straight to device memory. Stops at the
  // first error and returns it with the tensor named.
  using Visitor = std::function<Status(const TensorInfo&, std::span<const std::byte>)>;
  Status ForEachInFileOrder(const Visitor& fn) const;
  // The same for the tensors `order` lists (indices into tensors()), in that order, each
  // with read-ahead of the next. InvalidArgument for an index past tensors().
  Status ForEachInOrder(std::span<const size_t> order, const Visitor& fn) const;

  // Human-readable location for messages: "<file>: tensor '<name>'".
  std::string Where(const TensorInfo& t) const;

 private:
  Status AddFile(const std::string& path, std::vector<TensorInfo>* out);
  Status LoadIndex(const std::string& index_path);
  void BuildLookup();

  std::vector<std::string> file_paths_;
  std::vector<MappedFile> maps_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> by_name_;
  std::map<std::string, std::string> metadata_;
};

// Converts `n` elements from `in` (dtype `from`) to `out` (dtype `to`). Supports identity
// for every dtype and {BF16, F16, F32} -> {F32, BF16}. Returns false otherwise.
bool ConvertElements(DType from, const void* in, DType to, void* out, int64_t n);

// IEEE half -> float (exact).
float HalfToFloat(uint16_t h);

}  // namespace tandem::models
