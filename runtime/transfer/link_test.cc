// Object links over real 127.0.0.1 sockets, between two stores standing for two nodes:
// items arrive in order with their bytes; the sender's object stays held (in flight) until the
// receiver's ack; the end of stream finishes the producer at the receiver; a wrong token and
// an oversized first frame are refused before anything else; a peer that dies mid-stream
// gives a failure naming the link and the node.
#include "runtime/transfer/link.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "runtime/channel/channel_registry.h"
#include "runtime/store/store_test_fixture.h"
#include "runtime/transfer/socket.h"
#include "runtime/transfer/wire_port.h"

namespace tandem::transfer {
namespace {

using namespace std::chrono_literals;

constexpr char kToken[] = "link-test-token";

// Polls `done` until it holds or a generous deadline passes (a loaded machine is only slower).
bool WaitUntil(const std::function<bool()>& done) {
  const auto deadline = SteadyClock::now() + 60s;
  while (!done()) {
    if (SteadyClock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

// Records the failures a link reports.
struct Failures {
  std::mutex mu;
  std::vector<std::string> messages;
  LinkFailureFn Fn() {
    return [this](const Status& s) {
      std::lock_guard lock(mu);
      messages.push_back(s.message());
    };
  }
  size_t size() {
    std::lock_guard lock(mu);
    return messages.size();
  }
  std::string first() {
    std::lock_guard lock(mu);
    return messages.empty() ? "" : messages.front();
  }
};

// One "node": a store and a registry with channel "ch" of ObjectRefs.
struct Node {
  explicit Node(size_t capacity) {
    StoreOptions o;
    o.capacity_bytes = 4 << 20;
    o.backing = ArenaBacking::kHostPages;
    store = std::move(ObjectStore::Open(o)).value();
    ChannelOptions co;
    co.capacity = capacity;
    co.route = ChannelRoute::kReplica;
    TANDEM_CHECK_OK(channels.Declare("ch", co));
    wire.Register<ObjectRef>("ch");
    port = std::move(wire.Open("ch", channels)).value();
    ch = std::move(channels.Open<ObjectRef>("ch")).value();
  }
  ~Node() {
    port.reset();
    ch.reset();
    channels.CloseAll();
  }
  ObjectRef Put(uint8_t seed, size_t bytes) {
    MutableObject obj = std::move(store->Create(bytes, "test", 1s)).value();
    for (size_t i = 0; i < bytes; ++i) obj.data()[i] = static_cast<uint8_t>(seed + i * 7);
    return obj.Seal();
  }

  std::unique_ptr<ObjectStore> store;  // destroyed last
  ChannelRegistry channels;
  WireChannels wire;
  std::unique_ptr<WirePort> port;
  std::shared_ptr<Channel<ObjectRef>> ch;
};

LinkOptions Options(std::string token = kToken) {
  LinkOptions o;
  o.token = std::move(token);
  o.stop_grace = 5s;
  return o;
}

class LinkTest : public ::testing::Test {
 protected:
  void TearDown() override {
    if (sender_) sender_->Stop();
    if (listener_) listener_->Stop();
    sender_.reset();
    listener_.reset();
    for (Node* n : {&a_, &b_}) {
      n->ch.reset();
      n->port.reset();
    }
  }

  // Node b listens for the link "ch consumer 0" from node 0.
  void Listen() {
    auto l = LinkListener::Start(
        "127.0.0.1", 0, Options(), b_.store.get(),
        [this](const LinkHello& h) -> Result<LinkListener::Inbound> {
          if (h.channel != "ch" || h.consumer != 0 || h.from_node != 0)
            return InvalidArgumentError("no such link");
          return LinkListener::Inbound{b_.port.get(), {0}, "ch consumer 0 (node 0 -> node 1)"};
        },
        listener_failures_.Fn());
    ASSERT_TRUE(l.ok()) << l.status().ToString();
    listener_ = std::move(*l);
  }

  Result<std::unique_ptr<LinkSender>> ConnectSender(std::string token = kToken) {
    return LinkSender::Connect("127.0.0.1", listener_->port(), LinkHello{"ch", 0, 0},
                               Options(std::move(token)), "node 1", sender_failures_.Fn());
  }

  Node a_{4};  // the producer's node
  Node b_{1};  // the consumer's node: room for one item, so a second one waits unacked
  Failures listener_failures_, sender_failures_;
  std::unique_ptr<LinkListener> listener_;
  std::unique_ptr<LinkSender> sender_;
};

TEST_F(LinkTest, ItemsArriveAndTheFenceHoldsUntilTheReceiverAcks) {
  Listen();
  auto s = ConnectSender();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  sender_ = std::move(*s);
  std::atomic<bool> peer_closed{false};
  sender_->Start(a_.port.get(), 0, {0}, /*window=*/4, [&] { peer_closed = true; });

  // The first item fills b's channel and is acknowledged: a's copy is freed.
  ASSERT_TRUE(a_.ch->Push(a_.Put(1, 100000)).ok());
  ASSERT_TRUE(WaitUntil([&] { return a_.store->Stats().live_objects == 0; }))
      << a_.store->Stats().ToString();
  // The second cannot enter b's full channel, so it is not acknowledged: a holds it in
  // flight although a's channel and the test dropped it.
  ObjectRef second = a_.Put(2, 300000);
  ObjectRef probe = second;
  ASSERT_TRUE(a_.ch->Push(std::move(second)).ok());
  ASSERT_TRUE(WaitUntil([&] { return probe.counts().inflight_copies == 1; }));
  EXPECT_EQ(sender_->unacked(), 1u);
  EXPECT_EQ(a_.store->Stats().live_objects, 1u);
  const std::vector<uint8_t> want(probe.data(), probe.data() + probe.size());
  probe.Reset();
  EXPECT_EQ(a_.store->Stats().live_objects, 1u) << "freed before the ack";

  // b's consumer takes the first: the second lands, is acknowledged, and a frees it.
  Result<ObjectRef> got1 = b_.ch->PopAs(0, 30s);
  ASSERT_TRUE(got1.ok()) << got1.status().ToString();
  EXPECT_EQ(got1->size(), 100000u);
  EXPECT_EQ(got1->data()[99999], static_cast<uint8_t>(1 + 99999 * 7));
  ASSERT_TRUE(WaitUntil([&] { return a_.store->Stats().live_objects == 0; }));
  Result<ObjectRef> got2 = b_.ch->PopAs(0, 30s);
  ASSERT_TRUE(got2.ok()) << got2.status().ToString();
  ASSERT_EQ(got2->size(), want.size());
  EXPECT_EQ(std::memcmp(got2->data(), want.data(), want.size()), 0);
  EXPECT_EQ(got2->owner(), "link ch consumer 0 (node 0 -> node 1)");

  // The producer finishes at a: the link's end finishes it at b, whose consumer ends.
  ASSERT_TRUE(a_.ch->FinishProducer(0).ok());
  Result<ObjectRef> end = b_.ch->PopAs(0, 30s);
  EXPECT_EQ(end.status().code(), StatusCode::kUnavailable) << end.status().ToString();
  EXPECT_TRUE(WaitUntil([&] { return sender_->done(); }));
  EXPECT_EQ(listener_->ended(), 1);
  EXPECT_FALSE(peer_closed.load());
  EXPECT_EQ(sender_failures_.size(), 0u) << sender_failures_.first();
  EXPECT_EQ(listener_failures_.size(), 0u) << listener_failures_.first();
}

TEST_F(LinkTest, AConsumerThatFinishesClosesTheLinkAndTheSenderIsTold) {
  Listen();
  auto s = ConnectSender();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  sender_ = std::move(*s);
  std::atomic<bool> peer_closed{false};
  sender_->Start(a_.port.get(), 0, {0}, 4, [&] { peer_closed = true; });
  b_.ch->Close();  // the consumer is done
  ASSERT_TRUE(a_.ch->Push(a_.Put(3, 1000)).ok());
  ASSERT_TRUE(WaitUntil([&] { return peer_closed.load(); }));
  ASSERT_TRUE(WaitUntil([&] { return a_.store->Stats().live_objects == 0; }));
  EXPECT_TRUE(WaitUntil([&] { return sender_->done(); }));
  EXPECT_EQ(sender_failures_.size(), 0u) << sender_failures_.first();
  EXPECT_EQ(listener_failures_.size(), 0u) << listener_failures_.first();
}

TEST_F(LinkTest, AWrongTokenIsRefused) {
  Listen();
  auto s = ConnectSender("not-the-token");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("wrong token"), std::string::npos) << s.status().ToString();
  EXPECT_NE(s.status().message().find("node 1"), std::string::npos) << s.status().ToString();
  EXPECT_EQ(listener_failures_.size(), 0u) << "a refused peer is not the job's failure";
}

TEST_F(LinkTest, AnOversizedFirstFrameIsRefusedBeforeTheToken) {
  Listen();
  Result<Socket> raw = Connect("127.0.0.1", listener_->port(), 10s);
  ASSERT_TRUE(raw.ok()) << raw.status().ToString();
  const uint32_t huge = 1u << 30;
  ASSERT_TRUE(raw->SendAll(&huge, sizeof(huge)).ok());
  uint32_t n = 0;
  ASSERT_TRUE(raw->RecvAll(&n, sizeof(n)).ok());
  ASSERT_LT(n, 4096u);
  std::string reply(n, '\0');
  ASSERT_TRUE(raw->RecvAll(reply.data(), n).ok());
  ASSERT_FALSE(reply.empty());
  EXPECT_EQ(reply[0], '\0');
  EXPECT_NE(reply.find("over the 4096-byte limit before the token"), std::string::npos) << reply;
  // Nothing more: the receiver closed its side without reading the announced gigabyte.
  char c = 0;
  bool eof = false;
  EXPECT_FALSE(raw->RecvAll(&c, 1, &eof).ok());
  EXPECT_TRUE(eof);
  EXPECT_EQ(listener_failures_.size(), 0u);
}

TEST_F(LinkTest, AReceiverThatDiesNamesItsNode) {
  // A peer that accepts the link and then dies (its socket closes mid-stream).
  auto l = transfer::Listen("127.0.0.1", 0);
  ASSERT_TRUE(l.ok());
  const int port = *LocalPort(*l);
  std::thread peer([&] {
    Result<Socket> c = Accept(*l, 60s);
    if (!c.ok()) return;
    uint32_t n = 0;
    if (!c->RecvAll(&n, sizeof(n)).ok() || n > 4096) return;
    std::string hello(n, '\0');
    if (!c->RecvAll(hello.data(), n).ok()) return;
    const std::string ok(1, '\1');
    const uint32_t len = 1;
    (void)c->SendAll(&len, sizeof(len));
    (void)c->SendAll(ok.data(), 1);
    char frame[32];
    (void)c->RecvAll(frame, sizeof(frame));  // the first item's header; then it dies
  });
  auto s = LinkSender::Connect("127.0.0.1", port, LinkHello{"ch", 0, 0}, Options(), "node 1",
                               sender_failures_.Fn());
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  sender_ = std::move(*s);
  sender_->Start(a_.port.get(), 0, {0}, 4, [] {});
  ASSERT_TRUE(a_.ch->Push(a_.Put(4, 200000)).ok());
  peer.join();
  ASSERT_TRUE(WaitUntil([&] { return sender_failures_.size() > 0; }));
  const std::string why = sender_failures_.first();
  EXPECT_NE(why.find("ch consumer 0 (node 0 -> node 1)"), std::string::npos) << why;
  EXPECT_NE(why.find("broke"), std::string::npos) << why;
  sender_->Stop();
  EXPECT_EQ(a_.store->Stats().live_objects, 0u) << "the hold outlived a dead link";
}

TEST_F(LinkTest, ASenderThatDiesNamesTheLinkAtTheReceiver) {
  Listen();
  Result<Socket> raw = Connect("127.0.0.1", listener_->port(), 10s);
  ASSERT_TRUE(raw.ok());
  // A valid hello, then half a frame header, then the process "dies".
  std::string body("TNDMLNK1", 8);
  auto put_string = [&](const std::string& s) {
    const uint32_t n = static_cast<uint32_t>(s.size());
    body.append(reinterpret_cast<const char*>(&n), sizeof(n));
    body += s;
  };
  put_string(kToken);
  put_string("ch");
  const int32_t consumer = 0, from = 0;
  body.append(reinterpret_cast<const char*>(&consumer), sizeof(consumer));
  body.append(reinterpret_cast<const char*>(&from), sizeof(from));
  const uint32_t n = static_cast<uint32_t>(body.size());
  ASSERT_TRUE(raw->SendAll(&n, sizeof(n)).ok());
  ASSERT_TRUE(raw->SendAll(body.data(), body.size()).ok());
  uint32_t rn = 0;
  ASSERT_TRUE(raw->RecvAll(&rn, sizeof(rn)).ok());
  std::string reply(rn, '\0');
  ASSERT_TRUE(raw->RecvAll(reply.data(), rn).ok());
  ASSERT_EQ(reply, std::string(1, '\1'));
  const char half[16] = {1};
  ASSERT_TRUE(raw->SendAll(half, sizeof(half)).ok());
  raw->Close();
  ASSERT_TRUE(WaitUntil([&] { return listener_failures_.size() > 0; }));
  const std::string why = listener_failures_.first();
  EXPECT_NE(why.find("ch consumer 0 (node 0 -> node 1) broke before its end of stream"),
            std::string::npos)
      << why;
}

}  // namespace
}  // namespace tandem::transfer
