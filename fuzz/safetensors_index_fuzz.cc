// Fuzzes the sharded-checkpoint index (model.safetensors.index.json): weight_map entries,
// shard names (which must stay inside the index's directory), metadata, and the agreement
// of the index with two real shard files written once at start-up.
#include <cstring>
#include <vector>

#include "fuzz/fuzz_util.h"
#include "models/io/safetensors.h"
#include "models/io/safetensors_writer.h"

namespace {

using tandem::kernels::DType;
using tandem::models::TensorToWrite;

// shard-a.safetensors holds `a.weight` [2, 3] and `a.bias` [3]; shard-b holds `b.weight` [4].
void WriteShards() {
  static const float values[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  auto bytes = [](size_t n) {
    return std::as_bytes(std::span<const float>(values, n));
  };
  std::vector<TensorToWrite> a = {{"a.weight", DType::kF32, {2, 3}, bytes(6)},
                                  {"a.bias", DType::kF32, {3}, bytes(3)}};
  std::vector<TensorToWrite> b = {{"b.weight", DType::kF32, {4}, bytes(4)}};
  if (!tandem::models::WriteSafetensors(tandem::fuzz::ScratchPath("shard-a.safetensors"), a, {})
           .ok() ||
      !tandem::models::WriteSafetensors(tandem::fuzz::ScratchPath("shard-b.safetensors"), b, {})
           .ok()) {
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool ready = (WriteShards(), true);
  (void)ready;
  static const std::string index = tandem::fuzz::ScratchPath("model.safetensors.index.json");
  tandem::fuzz::WriteFile(index, data, size);
  auto r = tandem::models::SafetensorsReader::Open(index);
  if (!r.ok()) return 0;
  // Only the two shards exist, and the index must agree with them exactly.
  TANDEM_FUZZ_ASSERT(r->tensors().size() <= 3);
  for (const std::string& f : r->files()) {
    TANDEM_FUZZ_ASSERT(f.find("shard-") != std::string::npos);
  }
  for (const auto& t : r->tensors()) {
    std::vector<float> out(static_cast<size_t>(t.numel()));
    TANDEM_FUZZ_ASSERT(r->Read(t, DType::kF32, out.data(), t.numel() * 4).ok());
  }
  return 0;
}
