// Round trips through the safetensors writer and reader: every dtype, conversions, metadata,
// shapes (scalar, empty), file-order and explicit-order iteration and sharded checkpoints
// with an index.
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "models/io/model_test_util.h"
#include "models/io/safetensors.h"
#include "models/io/safetensors_writer.h"

namespace tandem::models {
namespace {

using kernels::bf16;
using testing::ScratchDir;

template <typename T>
std::span<const std::byte> AsBytes(const std::vector<T>& v) {
  return std::as_bytes(std::span<const T>(v));
}

std::vector<uint16_t> Bf16Of(const std::vector<float>& f) {
  std::vector<uint16_t> out;
  for (float x : f) out.push_back(bf16::FromFloat(x));
  return out;
}

TEST(SafetensorsTest, RoundTripsEveryDType) {
  ScratchDir dir;
  std::vector<float> f32 = {1.5f, -2.25f, 3.0e-8f, 65504.0f, -0.0f, 7.0f};
  std::vector<uint16_t> b16 = Bf16Of({0.5f, -1.0f, 3.0f});
  std::vector<uint16_t> f16 = {0x3c00, 0xc000, 0x0001};  // 1, -2, smallest subnormal
  std::vector<int32_t> i32 = {-7, 0, 1 << 30};
  std::vector<int64_t> i64 = {int64_t{1} << 40, -1};
  std::vector<uint8_t> u8 = {0, 255, 7};  // odd size: later tensors must stay aligned
  std::vector<TensorToWrite> ts = {
      {"w.f32", DType::kF32, {2, 3}, AsBytes(f32)},
      {"w.bf16", DType::kBF16, {3}, AsBytes(b16)},
      {"w.f16", DType::kF16, {1, 3}, AsBytes(f16)},
      {"w.i32", DType::kI32, {3}, AsBytes(i32)},
      {"w.i64", DType::kI64, {2}, AsBytes(i64)},
      {"w.u8", DType::kU8, {3, 1}, AsBytes(u8)},
  };
  const std::string path = dir.File("m.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, ts, {{"format", "pt"}, {"step", "12"}}).ok());

  auto r = SafetensorsReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->tensors().size(), ts.size());
  EXPECT_EQ(r->metadata().at("format"), "pt");
  EXPECT_EQ(r->metadata().at("step"), "12");
  for (const TensorToWrite& w : ts) {
    const TensorInfo* t = r->Find(w.name);
    ASSERT_NE(t, nullptr) << w.name;
    EXPECT_EQ(t->dtype, w.dtype);
    EXPECT_EQ(t->shape, w.shape);
    auto bytes = r->Bytes(*t);
    ASSERT_EQ(bytes.size(), w.data.size());
    EXPECT_EQ(std::memcmp(bytes.data(), w.data.data(), bytes.size()), 0) << w.name;
    // HF layout: every tensor starts at a multiple of its element size.
    EXPECT_EQ(reinterpret_cast<uintptr_t>(bytes.data()) % kernels::DTypeSize(t->dtype), 0u);
  }
  // Same-dtype Read is a raw copy.
  std::vector<int64_t> back(2);
  ASSERT_TRUE(r->Read("w.i64", DType::kI64, back.data(), 16).ok());
  EXPECT_EQ(back, i64);
}

TEST(SafetensorsTest, HeaderIsPaddedToEightBytes) {
  ScratchDir dir;
  std::vector<float> v = {1.0f};
  std::vector<TensorToWrite> ts = {{"a", DType::kF32, {1}, AsBytes(v)}};
  const std::string path = dir.File("p.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, ts).ok());
  std::string raw = testing::ReadRaw(path);
  uint64_t n = 0;
  std::memcpy(&n, raw.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(raw.size(), 8 + n + 4);
  EXPECT_EQ(raw[8 + n - 1] == ' ' || raw[8 + n - 1] == '}', true);
}

TEST(SafetensorsTest, ConvertsBetweenFloatTypes) {
  ScratchDir dir;
  // Values exactly representable in bf16 survive f32 -> bf16 -> f32 unchanged.
  std::vector<float> exact = {1.0f, -0.5f, 3.140625f, 0x1.fep100f, -0x1.8p-100f, 0.0f};
  // Ties between two bf16 values (bf16's ulp at 1 is 2^-7) round to the even mantissa:
  // 1 + 2^-8 down to 1, 1 + 3*2^-8 up to 1 + 2^-6.
  std::vector<float> inexact = {1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f};
  std::vector<uint16_t> as_bf16 = Bf16Of(exact);
  std::vector<uint16_t> half = {0x3c00, 0x3555, 0x0200, 0x8001, 0x7c00};  // 1, ~1/3, subnormals, inf
  std::vector<TensorToWrite> ts = {{"exact", DType::kF32, {6}, AsBytes(exact)},
                                   {"inexact", DType::kF32, {2}, AsBytes(inexact)},
                                   {"bf", DType::kBF16, {6}, AsBytes(as_bf16)},
                                   {"half", DType::kF16, {5}, AsBytes(half)}};
  const std::string path = dir.File("c.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, ts).ok());
  auto r = SafetensorsReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();

  std::vector<uint16_t> b(6);
  ASSERT_TRUE(r->Read("exact", DType::kBF16, b.data(), 12).ok());
  EXPECT_EQ(b, as_bf16);
  std::vector<float> f(6);
  ASSERT_TRUE(r->Read("bf", DType::kF32, f.data(), 24).ok());
  EXPECT_EQ(f, exact);

  std::vector<uint16_t> b2(2);
  ASSERT_TRUE(r->Read("inexact", DType::kBF16, b2.data(), 4).ok());
  EXPECT_EQ(bf16::ToFloat(b2[0]), 1.0f);
  EXPECT_EQ(bf16::ToFloat(b2[1]), 1.0f + 0x1p-6f);

  std::vector<float> h(5);
  ASSERT_TRUE(r->Read("half", DType::kF32, h.data(), 20).ok());
  EXPECT_EQ(h[0], 1.0f);
  EXPECT_EQ(h[1], 0x1.554p-2f);  // 0x3555: mantissa 0x155, exponent -2
  EXPECT_EQ(h[2], 0x1p-15f);     // subnormal 0x200 = 512 * 2^-24
  EXPECT_EQ(h[3], -0x1p-24f);    // smallest negative subnormal
  EXPECT_TRUE(std::isinf(h[4]));

  // Integers only read as themselves; buffer sizes must match.
  std::vector<float> wrong(5);
  Status st = r->Read("half", DType::kF32, wrong.data(), 16);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("half"), std::string::npos) << st.message();
}

TEST(SafetensorsTest, ScalarsAndEmptyTensors) {
  ScratchDir dir;
  std::vector<float> scalar = {42.0f};
  std::vector<float> none;
  std::vector<TensorToWrite> ts = {{"scalar", DType::kF32, {}, AsBytes(scalar)},
                                   {"empty", DType::kF32, {0, 4}, AsBytes(none)},
                                   {"empty2", DType::kBF16, {3, 0}, AsBytes(none)}};
  const std::string path = dir.File("s.safetensors");
  ASSERT_TRUE(WriteSafetensors(path, ts).ok());
  auto r = SafetensorsReader::Open(path);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_TRUE(r->Get("scalar").value()->shape.empty());
  EXPECT_EQ(r->Get("scalar").value()->numel(), 1);
  EXPECT_EQ(r->Get("empty").value()->nbytes(), 0);
  EXPECT_EQ(r->Get("empty2").value()->shape, (std::vector<int64_t>{3, 0}));
  EXPECT_EQ(r->Get("nope").status().code(), StatusCode::kNotFound);
  // An empty tensor reads into an empty buffer, whose data() may be null (the same-dtype path
  // once passed that null to memcpy: UB that fuzz/corpus/safetensors_fuzz replays under UBSan).
  std::vector<float> out;
  EXPECT_TRUE(r->Read(*r->Get("empty").value(), DType::kF32, out.data(), 0).ok());
  EXPECT_TRUE(r->Read(*r->Get("empty2").value(), DType::kF32, out.data(), 0).ok());
}

TEST(SafetensorsTest, WriterRejectsBadInput) {
  ScratchDir dir;
  std::vector<float> v(3);
  std::vector<TensorToWrite> size_mismatch = {{"a", DType::kF32, {4}, AsBytes(v)}};
  Status st = WriteSafetensors(dir.File("x.safetensors"), size_mismatch);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'a'"), std::string::npos);
  std::vector<TensorToWrite> dup = {{"a", DType::kF32, {3}, AsBytes(v)},
                                    {"a", DType::kF32, {3}, AsBytes(v)}};
  EXPECT_EQ(WriteSafetensors(dir.File("x.safetensors"), dup).code(),
            StatusCode::kInvalidArgument);
  // Nothing, not even a temp file, is left behind by a rejected write.
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

// Tensors of mixed dtypes across 3+ shards; reading back by name and in file order.
TEST(SafetensorsTest, ShardedRoundTrip) {
  ScratchDir dir;
  std::vector<std::vector<float>> data;
  std::vector<TensorToWrite> ts;
  for (int i = 0; i < 7; ++i) data.emplace_back(16 + i, static_cast<float>(i));
  for (int i = 0; i < 7; ++i) {
    ts.push_back({fmt::format("layers.{}.w", i), DType::kF32,
                  {static_cast<int64_t>(data[i].size())}, AsBytes(data[i])});
  }
  std::vector<uint16_t> b = Bf16Of({1, 2, 3});
  ts.push_back({"norm.weight", DType::kBF16, {3}, AsBytes(b)});
  auto files = WriteShardedSafetensors(dir.path(), ts, /*max_shard_bytes=*/200,
                                       {{"producer", "tandem"}});
  ASSERT_TRUE(files.ok()) << files.status().ToString();
  ASSERT_GE(files->size(), 4u);  // >= 3 shards + index
  EXPECT_TRUE(files->back().ends_with("model.safetensors.index.json"));

  auto index = nlohmann::json::parse(testing::ReadRaw(files->back()));
  int64_t total = 0;
  for (const auto& t : ts) total += static_cast<int64_t>(t.data.size());
  EXPECT_EQ(index["metadata"]["total_size"], total);
  EXPECT_EQ(index["weight_map"].size(), ts.size());

  auto r = SafetensorsReader::Open(dir.path());  // the directory: the index wins
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->files().size(), files->size() - 1);
  EXPECT_EQ(r->metadata().at("producer"), "tandem");
  for (int i = 0; i < 7; ++i) {
    std::vector<float> out(data[i].size());
    ASSERT_TRUE(r->Read(ts[i].name, DType::kF32, out.data(), out.size() * 4).ok());
    EXPECT_EQ(out, data[i]);
  }
  // File order visits each tensor once, files in order, offsets increasing within a file.
  int last_file = -1;
  int64_t last_end = 0;
  size_t visited = 0;
  Status st = r->ForEachInFileOrder([&](const TensorInfo& t, std::span<const std::byte> bytes) {
    EXPECT_GE(t.file_index, last_file);
    if (t.file_index == last_file) {
      EXPECT_GE(t.begin, last_end);
    }
    last_file = t.file_index;
    last_end = t.end;
    EXPECT_EQ(static_cast<int64_t>(bytes.size()), t.nbytes());
    ++visited;
    return Status::Ok();
  });
  EXPECT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(visited, ts.size());
  // A visitor's error stops the pass and comes back naming the tensor.
  st = r->ForEachInFileOrder([](const TensorInfo& t, std::span<const std::byte>) {
    return t.name == "layers.3.w" ? InternalError("upload failed") : Status::Ok();
  });
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find("layers.3.w"), std::string::npos) << st.message();

  // An explicit order is followed as given (here back to front), each tensor's own bytes;
  // an index past the tensors is refused before any visit.
  std::vector<size_t> backwards(r->tensors().size());
  std::iota(backwards.rbegin(), backwards.rend(), size_t{0});
  std::vector<std::string> names;
  st = r->ForEachInOrder(backwards, [&](const TensorInfo& t, std::span<const std::byte> bytes) {
    EXPECT_EQ(static_cast<int64_t>(bytes.size()), t.nbytes());
    names.push_back(t.name);
    return Status::Ok();
  });
  EXPECT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(names.size(), r->tensors().size());
  for (size_t k = 0; k < names.size(); ++k) EXPECT_EQ(names[k], r->tensors()[backwards[k]].name);
  const std::vector<size_t> past = {0, r->tensors().size()};
  names.clear();
  st = r->ForEachInOrder(past, [&](const TensorInfo& t, std::span<const std::byte>) {
    names.push_back(t.name);
    return Status::Ok();
  });
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(names.empty());
}

TEST(SafetensorsTest, SmallCheckpointIsOneFileWithoutIndex) {
  ScratchDir dir;
  std::vector<float> v(8, 1.0f);
  std::vector<TensorToWrite> ts = {{"a", DType::kF32, {8}, AsBytes(v)}};
  auto files = WriteShardedSafetensors(dir.path(), ts, 1 << 20);
  ASSERT_TRUE(files.ok());
  ASSERT_EQ(files->size(), 1u);
  EXPECT_TRUE(files->front().ends_with("/model.safetensors"));
  auto r = SafetensorsReader::Open(dir.path());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_NE(r->Find("a"), nullptr);
}

}  // namespace
}  // namespace tandem::models
