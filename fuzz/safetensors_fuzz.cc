// Fuzzes SafetensorsReader on one .safetensors file: the 8-byte header length, the JSON
// header (dtypes, shapes, data_offsets, __metadata__) and the data region. Whatever the
// bytes, Open either fails with a Status or gives tensors whose bytes lie inside the file,
// and reading or converting every tensor stays inside the mapping (ASan checks).
#include <vector>

#include "fuzz/fuzz_util.h"
#include "models/io/safetensors.h"

using tandem::models::SafetensorsReader;
using tandem::models::TensorInfo;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = tandem::fuzz::ScratchPath("model.safetensors");
  tandem::fuzz::WriteFile(path, data, size);
  auto r = SafetensorsReader::Open(path);
  if (!r.ok()) return 0;
  for (const TensorInfo& t : r->tensors()) {
    TANDEM_FUZZ_ASSERT(t.begin >= 8 && t.begin <= t.end && static_cast<size_t>(t.end) <= size);
    TANDEM_FUZZ_ASSERT(r->Find(t.name) != nullptr);
    auto bytes = r->Bytes(t);
    TANDEM_FUZZ_ASSERT(static_cast<int64_t>(bytes.size()) == t.nbytes());
    if (t.numel() <= (1 << 16)) {
      std::vector<float> f32(static_cast<size_t>(t.numel()));
      (void)r->Read(t, tandem::kernels::DType::kF32, f32.data(), t.numel() * 4);
      std::vector<uint16_t> bf16(static_cast<size_t>(t.numel()));
      (void)r->Read(t, tandem::kernels::DType::kBF16, bf16.data(), t.numel() * 2);
    }
  }
  size_t seen = 0;
  (void)r->ForEachInFileOrder([&](const TensorInfo&, std::span<const std::byte> b) {
    seen += b.size();
    return tandem::Status::Ok();
  });
  TANDEM_FUZZ_ASSERT(seen <= size);
  return 0;
}
