// Object links: a channel's items for one consumer, sent over TCP from the node that
// produces them to the node that runs the consumer.
//
// The receiving node runs one LinkListener. A sender connects and its first frame (the
// hello) carries the job's token, the channel, the consumer and the sender's node rank; a
// first frame larger than max_hello_bytes is refused before anything else is read, as is a
// wrong token or a link the receiver does not expect, with a one-line reason sent back. Then
// the sender streams frames:
//   item   producer, number, the item's metadata and its objects' bytes (wire.h), straight
//          from the sender's store; the receiver decodes it into its own store, pushes it at
//          its producer and number (Channel::PushAt) and only then acknowledges it;
//   end    the consumer's stream from this node ended: the producers it carried are
//          finished in the receiver's channel.
// The receiver answers with
//   ack    per item, in order;
//   closed the consumer is gone (its channel closed, or the node is stopping): later items
//          are dropped (still acknowledged), and the sender closes its own copy of the
//          channel, as a consumer that finishes closes the channel in one process.
//
// The in-flight fence extends over the wire: a sent item's objects stay referenced on the
// sending node (HolderKind::kInFlight) until its ack arrives, so their bytes are never freed
// or reused while the receiver may still be reading them from the socket, and at most
// `window` items are unacknowledged per link.
//
// A link that breaks before its end of stream (a peer killed, a network failure) calls the
// failure callback once with an Unavailable naming the link and the peer node. Frames use
// the native byte order: every node of a cluster runs the same build (the head checks the
// version).
//
// Thread-safety: LinkSender and LinkListener own their threads; their methods may be called
// from any thread. The failure callback runs on a link's thread and must not call Stop().
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "runtime/core/clock.h"
#include "runtime/core/status.h"
#include "runtime/core/thread_annotations.h"
#include "runtime/store/object_store.h"
#include "runtime/transfer/socket.h"
#include "runtime/transfer/wire_port.h"

namespace tandem::transfer {

struct LinkHello {
  std::string channel;
  int consumer = 0;
  int from_node = 0;
};

struct LinkOptions {
  std::string token;                // the job's token; REQUIRED (non-empty)
  uint32_t max_hello_bytes = 4096;  // the most a first frame may carry, before authentication
  uint64_t max_item_bytes = uint64_t{1} << 36;  // one item's metadata plus objects
  Duration connect_timeout = std::chrono::seconds(30);
  Duration hello_timeout = std::chrono::seconds(10);  // a peer must say hello within this
  // Stop() lets a link end cleanly (end of stream, or the consumer gone) while it makes
  // progress, and cuts it after this long without any.
  Duration stop_grace = std::chrono::seconds(30);
};

using LinkFailureFn = std::function<void(const Status&)>;

// The receiving end: accepts links and pushes what they carry into local channels.
class LinkListener {
 public:
  // What a hello resolves to.
  struct Inbound {
    WirePort* port = nullptr;    // the channel to push into (outlives the listener)
    std::vector<int> producers;  // the producers the link may carry; its end finishes them
    std::string name;            // "hidden consumer 1 (node 0 -> node 2)", for messages
  };
  // InvalidArgument (sent back as the refusal) for a link this node does not expect.
  using ResolveFn = std::function<Result<Inbound>(const LinkHello&)>;

  // Listens on host:port (port 0: any free one); objects are created in `store`.
  static Result<std::unique_ptr<LinkListener>> Start(const std::string& host, int port,
                                                     LinkOptions options, ObjectStore* store,
                                                     ResolveFn resolve, LinkFailureFn on_failure);
  ~LinkListener();  // Stop()
  LinkListener(const LinkListener&) = delete;
  LinkListener& operator=(const LinkListener&) = delete;

  int port() const { return port_; }
  // Links that reached their end of stream so far.
  int ended() const;
  // Tells every open link that its consumer is gone, waits up to stop_grace for the senders
  // to end their streams (they do at once), then cuts what is left. Idempotent.
  void Stop();

 private:
  struct Conn;
  LinkListener(LinkOptions options, ObjectStore* store, ResolveFn resolve,
               LinkFailureFn on_failure);
  void AcceptLoop();
  void Serve(Conn* c);
  Status Handshake(Conn* c);
  Status Stream(Conn* c);
  void Fail(const Status& why);

  const LinkOptions o_;
  ObjectStore* const store_;
  const ResolveFn resolve_;
  const LinkFailureFn on_failure_;
  Socket listener_;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::atomic<bool> failed_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::unique_ptr<Conn>> conns_ GUARDED_BY(mu_);
  int ended_ GUARDED_BY(mu_) = 0;
  bool stopped_ GUARDED_BY(mu_) = false;
  std::thread acceptor_;
};

// The sending end of one link.
class LinkSender {
 public:
  // Connects to host:port and says hello; `peer` names the receiving node in messages
  // ("node 2"). Errors: the connection failed, or the receiver refused (its reason).
  static Result<std::unique_ptr<LinkSender>> Connect(const std::string& host, int port,
                                                     const LinkHello& hello, LinkOptions options,
                                                     std::string peer, LinkFailureFn on_failure);
  ~LinkSender();  // Stop()
  LinkSender(const LinkSender&) = delete;
  LinkSender& operator=(const LinkSender&) = delete;

  // Starts forwarding: pops consumer `consumer`'s items from `port` (in its order), sends
  // them and holds each until acknowledged, at most `window` at a time; when the consumer's
  // stream here ends (the channel is closed or every producer feeding it here finished and
  // it is drained) sends the end for `producers`. `on_peer_closed` runs once when the
  // receiver says the consumer is gone. REQUIRES: called once; `port` outlives the sender.
  void Start(WirePort* port, int consumer, std::vector<int> producers, size_t window,
             std::function<void()> on_peer_closed);

  // Items sent and not acknowledged yet (their objects are held).
  size_t unacked() const;
  // True once the link ended cleanly: its end acknowledged by the receiver closing, or the
  // consumer gone.
  bool done() const;
  // Waits for done() while the receiver makes progress (at most stop_grace without any),
  // then cuts the connection and drops the holds. Idempotent.
  void Stop();

 private:
  LinkSender(Socket s, LinkOptions options, std::string name, std::string peer,
             LinkFailureFn on_failure);
  void ForwardLoop();
  void AckLoop();
  Status SendEnd();
  void Fail(const Status& why);

  Socket sock_;
  const LinkOptions o_;
  const std::string name_;  // "hidden consumer 1 (node 0 -> node 2)"
  const std::string peer_;  // "node 2"
  const LinkFailureFn on_failure_;
  WirePort* port_ = nullptr;
  int consumer_ = 0;
  std::vector<int> producers_;
  size_t window_ = 1;
  std::function<void()> on_peer_closed_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  // An item sent or being sent. It is released once both its SendAll has returned and its
  // ack has come, whichever is last: the socket orders them for the kernel but not for the
  // memory model, so the forwarder's reads of the payload end before the release.
  struct Held {
    OutgoingItem item;
    bool sent = false;
    bool acked = false;
  };
  void ReleaseDoneLocked() REQUIRES(mu_);

  std::deque<Held> unacked_ GUARDED_BY(mu_);
  bool end_sent_ GUARDED_BY(mu_) = false;
  bool peer_closed_ GUARDED_BY(mu_) = false;
  bool done_ GUARDED_BY(mu_) = false;
  bool broken_ GUARDED_BY(mu_) = false;
  bool stopping_ GUARDED_BY(mu_) = false;
  bool stopped_ GUARDED_BY(mu_) = false;
  TimePoint last_progress_ GUARDED_BY(mu_){};
  std::thread forwarder_;
  std::thread acks_;
};

}  // namespace tandem::transfer
