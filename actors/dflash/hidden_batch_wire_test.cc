// A HiddenBatch crosses into another store with its metadata and layers intact, and a
// corrupt layer count is refused before anything is allocated.
#include "actors/dflash/hidden_batch_wire.h"

#include <cstring>
#include <memory>
#include <string>

#include <gtest/gtest.h>

namespace tandem::dflash {
namespace {

using namespace std::chrono_literals;
using transfer::WireCodec;
using transfer::WireReader;
using transfer::WireSpan;
using transfer::WireWriter;

std::unique_ptr<ObjectStore> OpenStore() {
  StoreOptions o;
  o.capacity_bytes = 1 << 20;
  o.backing = ArenaBacking::kHostPages;
  return std::move(ObjectStore::Open(o)).value();
}

HiddenBatch MakeBatch(ObjectStore& s) {
  HiddenBatch b;
  b.tokens.input_ids = {5, 9, 2, 7};
  b.tokens.position_ids = {0, 1, 0, 1};
  b.tokens.cu_seqlens = {0, 2, 4};
  b.tokens.loss_mask = {0, 1, 0, 1};
  b.tokens.max_seqlen = 2;
  b.tokens.index = 41;
  b.tokens.epoch = 3;
  b.checksum = b.tokens.Checksum();
  b.source_replica = 1;
  b.hidden_size = 8;
  b.layer_ids = {1, 4};
  b.next_position = {3, 42};
  for (uint8_t seed : {10, 20}) {
    MutableObject m = std::move(s.Create(4 * 8 * 2, "target", 1s)).value();
    for (size_t i = 0; i < m.size(); ++i) m.data()[i] = static_cast<uint8_t>(seed + i);
    b.layers.push_back(m.Seal());
  }
  return b;
}

Result<HiddenBatch> RoundTrip(const WireWriter& w, std::string_view meta, ObjectStore& dst) {
  std::string payload;
  for (const WireSpan& s : w.objects()) payload.append(reinterpret_cast<const char*>(s.data), s.size);
  size_t pos = 0;
  WireReader r(meta, w.object_bytes(), &dst, "link", [&](uint8_t* out, uint64_t n) -> Status {
    if (n > payload.size() - pos) return UnavailableError("the connection closed");
    std::memcpy(out, payload.data() + pos, n);
    pos += n;
    return Status::Ok();
  });
  ASSIGN_OR_RETURN(HiddenBatch b, WireCodec<HiddenBatch>::Decode(r));
  RETURN_IF_ERROR(r.Finish());
  return b;
}

TEST(HiddenBatchWireTest, ABatchCrossesWithItsMetadataAndLayers) {
  auto src = OpenStore(), dst = OpenStore();
  {
    HiddenBatch b = MakeBatch(*src);
    WireWriter w;
    WireCodec<HiddenBatch>::Encode(b, w);
    Result<HiddenBatch> got = RoundTrip(w, w.meta(), *dst);
    ASSERT_TRUE(got.ok()) << got.status().ToString();
    EXPECT_EQ(got->tokens.Checksum(), b.checksum);
    EXPECT_EQ(got->checksum, b.checksum);
    EXPECT_EQ(got->tokens.index, 41u);
    EXPECT_EQ(got->tokens.epoch, 3);
    EXPECT_EQ(got->tokens.max_seqlen, 2);
    EXPECT_EQ(got->source_replica, 1);
    EXPECT_EQ(got->hidden_size, 8);
    EXPECT_EQ(got->layer_ids, b.layer_ids);
    EXPECT_EQ(got->next_position, b.next_position);
    ASSERT_EQ(got->layers.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
      ASSERT_EQ(got->layers[i].size(), b.layers[i].size());
      EXPECT_EQ(std::memcmp(got->layers[i].data(), b.layers[i].data(), b.layers[i].size()), 0);
    }
  }
  EXPECT_EQ(dst->Stats().live_objects, 0u);
  EXPECT_EQ(src->Stats().live_objects, 0u);
}

TEST(HiddenBatchWireTest, ACorruptLayerCountIsDataLoss) {
  auto src = OpenStore(), dst = OpenStore();
  HiddenBatch b = MakeBatch(*src);
  WireWriter w;
  WireCodec<HiddenBatch>::Encode(b, w);
  // The layer count sits just before the two objects' sizes at the end of the metadata.
  std::string meta = w.meta();
  const uint64_t huge = uint64_t{1} << 40;
  std::memcpy(meta.data() + meta.size() - 3 * sizeof(uint64_t), &huge, sizeof(huge));
  Result<HiddenBatch> got = RoundTrip(w, meta, *dst);
  EXPECT_EQ(got.status().code(), StatusCode::kDataLoss) << got.status().ToString();
  EXPECT_NE(got.status().message().find("layers on the wire"), std::string::npos);
  EXPECT_EQ(dst->Stats().live_objects, 0u);
}

}  // namespace
}  // namespace tandem::dflash
