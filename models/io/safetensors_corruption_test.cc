// Corrupt and truncated checkpoints: each must fail with the right code and a message that
// names the file (and the tensor, where one is at fault) — never crash or read zeros.
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "models/io/model_test_util.h"
#include "models/io/safetensors.h"
#include "models/io/safetensors_writer.h"

namespace tandem::models {
namespace {

using testing::ReadRaw;
using testing::ScratchDir;
using testing::WriteRaw;

// 8-byte little-endian length + header + `data_bytes` bytes of data.
std::string RawFile(std::string_view header, size_t data_bytes, uint64_t length_field = 0) {
  uint64_t n = length_field ? length_field : header.size();
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(n >> (8 * i));
  out.append(header);
  out.append(data_bytes, '\x11');
  return out;
}

class CorruptionTest : public ::testing::Test {
 protected:
  // Writes `bytes` to a file and expects Open to fail with `code`, mentioning every string
  // in `mentions` (the file path is always checked).
  void ExpectOpenFails(std::string_view bytes, StatusCode code,
                       std::vector<std::string> mentions) {
    const std::string path = dir_.File("bad.safetensors");
    WriteRaw(path, bytes);
    auto r = SafetensorsReader::Open(path);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), code) << r.status().ToString();
    mentions.push_back(path);
    for (const std::string& m : mentions) {
      EXPECT_NE(r.status().message().find(m), std::string::npos)
          << "'" << m << "' missing from: " << r.status().message();
    }
  }

  std::string ValidFile() {
    std::vector<float> a(6, 1.0f), b(4, 2.0f);
    std::vector<TensorToWrite> ts = {
        {"a", DType::kF32, {2, 3}, std::as_bytes(std::span<const float>(a))},
        {"b", DType::kF32, {4}, std::as_bytes(std::span<const float>(b))}};
    const std::string path = dir_.File("good.safetensors");
    TANDEM_CHECK_OK(WriteSafetensors(path, ts));
    return ReadRaw(path);
  }

  ScratchDir dir_;
};

TEST_F(CorruptionTest, TruncatedDataNamesTheTensor) {
  std::string good = ValidFile();
  // Tensors are laid out a (24 bytes) then b (16 bytes); cutting 4 bytes clips b.
  ExpectOpenFails(good.substr(0, good.size() - 4), StatusCode::kDataLoss, {"'b'", "truncated"});
}

TEST_F(CorruptionTest, EveryTruncationFailsCleanly) {
  std::string good = ValidFile();
  const std::string path = dir_.File("cut.safetensors");
  for (size_t n = 0; n < good.size(); ++n) {
    WriteRaw(path, std::string_view(good).substr(0, n));
    auto r = SafetensorsReader::Open(path);
    ASSERT_FALSE(r.ok()) << "prefix of " << n << " bytes was accepted";
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().ToString();
  }
}

TEST_F(CorruptionTest, RandomHeaderByteFlipsNeverCrash) {
  std::string good = ValidFile();
  uint64_t header_len;
  std::memcpy(&header_len, good.data(), 8);
  std::mt19937 rng(1234);
  const std::string path = dir_.File("flip.safetensors");
  int rejected = 0;
  for (int trial = 0; trial < 300; ++trial) {
    std::string bad = good;
    size_t pos = std::uniform_int_distribution<size_t>(0, 8 + header_len - 1)(rng);
    bad[pos] = static_cast<char>(std::uniform_int_distribution<int>(0, 255)(rng));
    WriteRaw(path, bad);
    auto r = SafetensorsReader::Open(path);
    if (r.ok()) {
      // Accepted only if still self-consistent: every tensor inside the file.
      for (const TensorInfo& t : r->tensors()) {
        EXPECT_LE(t.end, static_cast<int64_t>(bad.size()));
        EXPECT_EQ(t.nbytes(), t.numel() * kernels::DTypeSize(t.dtype));
      }
    } else {
      ++rejected;
      EXPECT_NE(r.status().message().find(path), std::string::npos);
    }
  }
  EXPECT_GT(rejected, 0);
}

TEST_F(CorruptionTest, TooShortAndEmpty) {
  ExpectOpenFails("", StatusCode::kDataLoss, {"too short"});
  ExpectOpenFails("abc", StatusCode::kDataLoss, {"too short"});
}

TEST_F(CorruptionTest, HeaderLengthBeyondFile) {
  ExpectOpenFails(RawFile("{}", 0, /*length_field=*/4096), StatusCode::kDataLoss,
                  {"header length 4096"});
}

TEST_F(CorruptionTest, HeaderLengthOverLimit) {
  ExpectOpenFails(RawFile("{}", 0, /*length_field=*/uint64_t{1} << 40), StatusCode::kDataLoss,
                  {"limit"});
}

TEST_F(CorruptionTest, BadJson) {
  ExpectOpenFails(RawFile(R"({"a": {"dtype": "F32", "shape": [1], )", 4), StatusCode::kDataLoss,
                  {"not valid JSON"});
  ExpectOpenFails(RawFile("[1, 2]", 0), StatusCode::kDataLoss, {"not a JSON object"});
}

TEST_F(CorruptionTest, DeeplyNestedHeaderIsRefused) {
  // A shape nested 200,000 deep: its error message once dump()ed it recursively.
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  ExpectOpenFails(RawFile("{\"a\": {\"dtype\": \"F32\", \"shape\": [" + deep +
                              "], \"data_offsets\": [0, 4]}}", 4),
                  StatusCode::kDataLoss, {"nested deeper than"});
}

TEST_F(CorruptionTest, DuplicateTensorName) {
  ExpectOpenFails(RawFile(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                             "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})", 8),
                  StatusCode::kDataLoss, {"'a'", "twice"});
}

TEST_F(CorruptionTest, OverlappingOffsets) {
  ExpectOpenFails(RawFile(R"({"first": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]},
                             "second": {"dtype": "F32", "shape": [4], "data_offsets": [8, 24]}})",
                          24),
                  StatusCode::kDataLoss, {"'first'", "'second'", "overlaps"});
}

TEST_F(CorruptionTest, OffsetsPastEnd) {
  ExpectOpenFails(RawFile(R"({"w": {"dtype": "BF16", "shape": [8], "data_offsets": [0, 16]}})", 10),
                  StatusCode::kDataLoss, {"'w'", "past the end"});
}

TEST_F(CorruptionTest, ShapeBytesMismatch) {
  ExpectOpenFails(RawFile(R"({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 20]}})",
                          20),
                  StatusCode::kDataLoss, {"'w'", "needs 24 bytes"});
}

TEST_F(CorruptionTest, BadShapeAndOffsetValues) {
  ExpectOpenFails(RawFile(R"({"w": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4),
                  StatusCode::kDataLoss, {"'w'", "bad dimension"});
  ExpectOpenFails(RawFile(R"({"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}})", 4),
                  StatusCode::kDataLoss, {"'w'"});
  ExpectOpenFails(RawFile(R"({"w": {"dtype": "F32", "shape": [1], "data_offsets": [4, 0]}})", 4),
                  StatusCode::kDataLoss, {"'w'", "data_offsets"});
  ExpectOpenFails(
      RawFile(R"({"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 0]}})",
              0),
      StatusCode::kDataLoss, {"'w'", "overflows"});
  ExpectOpenFails(RawFile(R"({"w": {"dtype": "F32", "shape": [1]}})", 4), StatusCode::kDataLoss,
                  {"'w'", "data_offsets"});
  // numel fits int64 but numel * 4 bytes does not (the message used to compute
  // that product anyway: signed overflow).
  ExpectOpenFails(
      RawFile(R"({"w": {"dtype": "F32", "shape": [4611686018427387904], "data_offsets": [0, 4]}})",
              4),
      StatusCode::kDataLoss, {"'w'", "more than 2^63 bytes"});
}

TEST_F(CorruptionTest, UnknownDType) {
  ExpectOpenFails(RawFile(R"({"w": {"dtype": "Q4_K", "shape": [4], "data_offsets": [0, 4]}})", 4),
                  StatusCode::kInvalidArgument, {"'w'", "Q4_K"});
}

TEST_F(CorruptionTest, MetadataMustBeStrings) {
  ExpectOpenFails(RawFile(R"({"__metadata__": {"step": 3}})", 0), StatusCode::kDataLoss,
                  {"__metadata__", "step"});
}

class IndexCorruptionTest : public CorruptionTest {
 protected:
  // Two shards written by the writer; returns the index path.
  std::string WriteSharded() {
    a_.assign(64, 1.0f);
    b_.assign(64, 2.0f);
    std::vector<TensorToWrite> ts = {
        {"a", DType::kF32, {64}, std::as_bytes(std::span<const float>(a_))},
        {"b", DType::kF32, {64}, std::as_bytes(std::span<const float>(b_))}};
    auto files = WriteShardedSafetensors(dir_.path(), ts, 256);
    TANDEM_CHECK_OK(files.status());
    TANDEM_CHECK(files->size() == 3);
    return files->back();
  }
  void ExpectIndexFails(const std::string& index, StatusCode code,
                        const std::vector<std::string>& mentions) {
    auto r = SafetensorsReader::Open(index);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), code) << r.status().ToString();
    for (const std::string& m : mentions) {
      EXPECT_NE(r.status().message().find(m), std::string::npos)
          << "'" << m << "' missing from: " << r.status().message();
    }
  }
  std::vector<float> a_, b_;
};

// Found by safetensors_index_fuzz: a shard name longer than a path may be threw
// std::filesystem_error (an abort) instead of a NotFound naming the index.
TEST_F(IndexCorruptionTest, ShardNameTooLongForAPath) {
  const std::string index = dir_.path() + "/model.safetensors.index.json";
  const std::string shard(5000, 's');
  testing::WriteRaw(index, "{\"weight_map\": {\"a\": \"" + shard + "\"}}");
  ExpectIndexFails(index, StatusCode::kNotFound, {"model.safetensors.index.json", "'a'"});
}

TEST_F(IndexCorruptionTest, MissingShard) {
  std::string index = WriteSharded();
  std::filesystem::remove(dir_.File("model-00002-of-00002.safetensors"));
  ExpectIndexFails(index, StatusCode::kNotFound,
                   {index, "model-00002-of-00002.safetensors", "'b'"});
}

TEST_F(IndexCorruptionTest, IndexNamesTensorAbsentFromShard) {
  std::string index = WriteSharded();
  WriteRaw(index, R"({"weight_map": {"a": "model-00001-of-00002.safetensors",
                                     "b": "model-00002-of-00002.safetensors",
                                     "ghost": "model-00002-of-00002.safetensors"}})");
  ExpectIndexFails(index, StatusCode::kDataLoss, {index, "'ghost'", "does not contain"});
}

TEST_F(IndexCorruptionTest, ShardHoldsTensorMissingFromIndex) {
  std::string index = WriteSharded();
  // The index points at shard 2 only for "a"; shard 2's own tensor "b" is unaccounted for.
  WriteRaw(index, R"({"weight_map": {"a": "model-00002-of-00002.safetensors"}})");
  ExpectIndexFails(index, StatusCode::kDataLoss,
                   {"model-00002-of-00002.safetensors", "'b'", "not listed"});
}

TEST_F(IndexCorruptionTest, TensorInTheWrongShard) {
  std::string index = WriteSharded();
  WriteRaw(index, R"({"weight_map": {"a": "model-00002-of-00002.safetensors",
                                     "b": "model-00002-of-00002.safetensors"}})");
  ExpectIndexFails(index, StatusCode::kDataLoss, {"'a'"});
}

TEST_F(IndexCorruptionTest, CorruptShardIsNamed) {
  std::string index = WriteSharded();
  const std::string shard = dir_.File("model-00002-of-00002.safetensors");
  std::string raw = ReadRaw(shard);
  WriteRaw(shard, raw.substr(0, raw.size() - 1));
  ExpectIndexFails(index, StatusCode::kDataLoss, {shard, "'b'"});
}

TEST_F(IndexCorruptionTest, BadIndexJsonAndPaths) {
  std::string index = WriteSharded();
  WriteRaw(index, R"({"weight_map": )");
  ExpectIndexFails(index, StatusCode::kDataLoss, {index, "JSON"});
  WriteRaw(index, R"({"metadata": {}})");
  ExpectIndexFails(index, StatusCode::kDataLoss, {index, "weight_map"});
  WriteRaw(index, R"({"weight_map": {"a": "../elsewhere.safetensors"}})");
  ExpectIndexFails(index, StatusCode::kDataLoss, {index, "'a'"});
}

TEST_F(CorruptionTest, MissingFileAndDirectory) {
  auto r = SafetensorsReader::Open(dir_.File("absent.safetensors"));
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("absent.safetensors"), std::string::npos);
  r = SafetensorsReader::Open(dir_.path());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace tandem::models
