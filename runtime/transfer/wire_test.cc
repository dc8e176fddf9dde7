// Wire items: an item with metadata and two objects survives Encode/Decode into another
// store byte for byte; truncated or lying metadata is DataLoss, never an overrun.
#include "runtime/transfer/wire.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace tandem::transfer {
namespace {

using namespace std::chrono_literals;

struct Pair {
  std::vector<int32_t> ids;
  double scale = 0;
  ObjectRef a, b;
};

}  // namespace

template <>
struct WireCodec<Pair> {
  static void Encode(const Pair& p, WireWriter& w) {
    w.Vector(p.ids);
    w.Pod(p.scale);
    w.Object(p.a);
    w.Object(p.b);
  }
  static Result<Pair> Decode(WireReader& r) {
    Pair p;
    RETURN_IF_ERROR(r.Vector(&p.ids));
    RETURN_IF_ERROR(r.Pod(&p.scale));
    ASSIGN_OR_RETURN(p.a, r.Object());
    ASSIGN_OR_RETURN(p.b, r.Object());
    return p;
  }
};
static_assert(WireItem<Pair>);
static_assert(WireItem<ObjectRef>);

namespace {

std::unique_ptr<ObjectStore> OpenStore() {
  StoreOptions o;
  o.capacity_bytes = 1 << 20;
  o.backing = ArenaBacking::kHostPages;
  return std::move(ObjectStore::Open(o)).value();
}

ObjectRef Make(ObjectStore& s, size_t n, uint8_t seed) {
  MutableObject m = std::move(s.Create(n, "test", 1s)).value();
  for (size_t i = 0; i < n; ++i) m.data()[i] = static_cast<uint8_t>(seed + i);
  return m.Seal();
}

// The objects' bytes, concatenated as the link sends them after the metadata.
std::string Payload(const WireWriter& w) {
  std::string out;
  for (const WireSpan& s : w.objects()) out.append(reinterpret_cast<const char*>(s.data), s.size);
  return out;
}

WireReader::PayloadFn From(const std::string& payload, size_t* pos) {
  return [&payload, pos](uint8_t* dst, uint64_t n) -> Status {
    if (n > payload.size() - *pos) return UnavailableError("the connection closed");
    std::memcpy(dst, payload.data() + *pos, n);
    *pos += n;
    return Status::Ok();
  };
}

TEST(WireTest, AnItemCrossesIntoAnotherStoreByteForByte) {
  auto src = OpenStore(), dst = OpenStore();
  {
    Pair p{{5, 6, 7}, 0.25, Make(*src, 1000, 3), Make(*src, 17, 9)};
    WireWriter w;
    WireCodec<Pair>::Encode(p, w);
    EXPECT_EQ(w.object_bytes(), 1017u);
    const std::string payload = Payload(w);
    size_t pos = 0;
    WireReader r(w.meta(), w.object_bytes(), dst.get(), "link", From(payload, &pos));
    Result<Pair> q = WireCodec<Pair>::Decode(r);
    ASSERT_TRUE(q.ok()) << q.status().ToString();
    EXPECT_TRUE(r.Finish().ok());
    EXPECT_EQ(q->ids, p.ids);
    EXPECT_EQ(q->scale, 0.25);
    ASSERT_EQ(q->a.size(), 1000u);
    EXPECT_EQ(std::memcmp(q->a.data(), p.a.data(), 1000), 0);
    EXPECT_EQ(std::memcmp(q->b.data(), p.b.data(), 17), 0);
    EXPECT_EQ(q->a.owner(), "link");
    EXPECT_EQ(dst->Stats().live_objects, 2u);
  }
  EXPECT_EQ(dst->Stats().live_objects, 0u);
  EXPECT_EQ(src->Stats().live_objects, 0u);
}

TEST(WireTest, TruncatedOrLyingMetadataIsDataLoss) {
  auto src = OpenStore(), dst = OpenStore();
  Pair p{{1, 2}, 1.0, Make(*src, 64, 1), Make(*src, 64, 2)};
  WireWriter w;
  WireCodec<Pair>::Encode(p, w);
  const std::string payload = Payload(w);
  for (size_t cut : {size_t{0}, size_t{4}, w.meta().size() - 1}) {
    size_t pos = 0;
    WireReader r(std::string_view(w.meta()).substr(0, cut), w.object_bytes(), dst.get(), "link",
                 From(payload, &pos));
    EXPECT_EQ(WireCodec<Pair>::Decode(r).status().code(), StatusCode::kDataLoss) << cut;
  }
  // A vector count far beyond the metadata.
  std::string lying = w.meta();
  const uint64_t huge = uint64_t{1} << 60;
  std::memcpy(lying.data(), &huge, sizeof(huge));
  size_t pos = 0;
  WireReader r1(lying, w.object_bytes(), dst.get(), "link", From(payload, &pos));
  EXPECT_EQ(WireCodec<Pair>::Decode(r1).status().code(), StatusCode::kDataLoss);
  // Objects larger than the payload the frame announced.
  pos = 0;
  WireReader r2(w.meta(), 100, dst.get(), "link", From(payload, &pos));
  EXPECT_EQ(WireCodec<Pair>::Decode(r2).status().code(), StatusCode::kDataLoss);
  // Leftover metadata.
  std::string longer = w.meta() + "x";
  pos = 0;
  WireReader r3(longer, w.object_bytes(), dst.get(), "link", From(payload, &pos));
  ASSERT_TRUE(WireCodec<Pair>::Decode(r3).ok());
  EXPECT_EQ(r3.Finish().code(), StatusCode::kDataLoss);
  EXPECT_EQ(dst->Stats().live_objects, 0u);
}

}  // namespace
}  // namespace tandem::transfer
