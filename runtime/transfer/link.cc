// Object links: see link.h.
#include "runtime/transfer/link.h"

#include <sys/socket.h>
#include <sys/time.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include <fmt/format.h>

#include "runtime/core/logging.h"

namespace tandem::transfer {
namespace {

constexpr char kMagic[8] = {'T', 'N', 'D', 'M', 'L', 'N', 'K', '1'};

enum FrameType : uint32_t { kItem = 1, kEnd = 2, kAck = 3, kClosed = 4 };

struct FrameHeader {
  uint32_t type = 0;
  int32_t producer = 0;
  uint64_t seq = 0;
  uint64_t meta_bytes = 0;
  uint64_t payload_bytes = 0;
};
static_assert(sizeof(FrameHeader) == 32);

// A length-prefixed blob: u32 length, then the bytes.
Status SendBlob(Socket& s, const std::string& body) {
  const uint32_t n = static_cast<uint32_t>(body.size());
  struct iovec v[2] = {{const_cast<uint32_t*>(&n), sizeof(n)},
                       {const_cast<char*>(body.data()), body.size()}};
  return s.SendAll(v, 2);
}

void PutString(std::string* out, const std::string& s) {
  const uint32_t n = static_cast<uint32_t>(s.size());
  out->append(reinterpret_cast<const char*>(&n), sizeof(n));
  out->append(s);
}

bool GetString(std::string_view* in, std::string* s) {
  uint32_t n = 0;
  if (in->size() < sizeof(n)) return false;
  std::memcpy(&n, in->data(), sizeof(n));
  in->remove_prefix(sizeof(n));
  if (in->size() < n) return false;
  s->assign(in->data(), n);
  in->remove_prefix(n);
  return true;
}

template <class V>
bool GetPod(std::string_view* in, V* v) {
  if (in->size() < sizeof(V)) return false;
  std::memcpy(v, in->data(), sizeof(V));
  in->remove_prefix(sizeof(V));
  return true;
}

std::string EncodeHello(const LinkHello& h, const std::string& token) {
  std::string body(kMagic, sizeof(kMagic));
  PutString(&body, token);
  PutString(&body, h.channel);
  body.append(reinterpret_cast<const char*>(&h.consumer), sizeof(h.consumer));
  body.append(reinterpret_cast<const char*>(&h.from_node), sizeof(h.from_node));
  return body;
}

// Compares in time that depends only on the lengths.
bool TokensEqual(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

void SetRecvTimeout(Socket& s, Duration d) {
  timeval tv{};
  if (d != Duration::zero()) {
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(d).count();
    tv.tv_sec = static_cast<time_t>(us / 1000000);
    tv.tv_usec = static_cast<suseconds_t>(us % 1000000);
  }
  (void)::setsockopt(s.fd(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

Status SendHeader(Socket& s, const FrameHeader& h) { return s.SendAll(&h, sizeof(h)); }

}  // namespace

// ---------------------------------------------------------------------------------------
// Receiving side.

struct LinkListener::Conn {
  Socket sock;
  std::mutex write_mu;  // acks (its thread) and the closed notice (Stop)
  Inbound in;
  std::string name = "an unauthenticated link";
  bool authed = false;
  bool closed_sent = false;  // under write_mu
  std::atomic<bool> finished{false};
  std::thread thread;

  Status Send(const FrameHeader& h) {
    std::lock_guard lock(write_mu);
    return SendHeader(sock, h);
  }
  void SendClosed() {
    std::lock_guard lock(write_mu);
    if (closed_sent || !authed) return;
    closed_sent = true;
    FrameHeader h;
    h.type = kClosed;
    (void)SendHeader(sock, h);
  }
};

LinkListener::LinkListener(LinkOptions options, ObjectStore* store, ResolveFn resolve,
                           LinkFailureFn on_failure)
    : o_(std::move(options)),
      store_(store),
      resolve_(std::move(resolve)),
      on_failure_(std::move(on_failure)) {}

Result<std::unique_ptr<LinkListener>> LinkListener::Start(const std::string& host, int port,
                                                          LinkOptions options,
                                                          ObjectStore* store, ResolveFn resolve,
                                                          LinkFailureFn on_failure) {
  if (options.token.empty()) return InvalidArgumentError("object links need the job's token");
  std::unique_ptr<LinkListener> l(
      new LinkListener(std::move(options), store, std::move(resolve), std::move(on_failure)));
  ASSIGN_OR_RETURN(l->listener_, Listen(host, port));
  ASSIGN_OR_RETURN(l->port_, LocalPort(l->listener_));
  l->acceptor_ = std::thread([p = l.get()] { p->AcceptLoop(); });
  return l;
}

LinkListener::~LinkListener() { Stop(); }

int LinkListener::ended() const {
  std::lock_guard lock(mu_);
  return ended_;
}

void LinkListener::Fail(const Status& why) {
  if (stopping_.load() || failed_.exchange(true)) return;
  TLOG_ERROR("{}", why.message());
  if (on_failure_) on_failure_(why);
}

void LinkListener::AcceptLoop() {
  while (!stopping_.load()) {
    Result<Socket> s = Accept(listener_, std::chrono::milliseconds(200));
    if (!s.ok()) {
      if (s.status().code() == StatusCode::kDeadlineExceeded) continue;
      break;
    }
    auto c = std::make_unique<Conn>();
    c->sock = std::move(*s);
    Conn* raw = c.get();
    std::lock_guard lock(mu_);
    if (stopped_) break;
    conns_.push_back(std::move(c));
    raw->thread = std::thread([this, raw] { Serve(raw); });
  }
}

void LinkListener::Serve(Conn* c) {
  Status st = Handshake(c);
  if (st.ok()) st = Stream(c);
  c->finished.store(true);
  cv_.notify_all();
}

Status LinkListener::Handshake(Conn* c) {
  auto refuse = [c](const std::string& why) {
    std::string body(1, '\0');
    body += why;
    (void)SendBlob(c->sock, body);
    c->sock.ShutdownWrite();
    TLOG_WARN("object link refused: {}", why);
    return UnavailableError("{}", why);
  };
  SetRecvTimeout(c->sock, o_.hello_timeout);
  uint32_t n = 0;
  if (Status st = c->sock.RecvAll(&n, sizeof(n)); !st.ok()) return st;
  if (n > o_.max_hello_bytes)
    return refuse(fmt::format("a first frame of {} bytes is over the {}-byte limit before the "
                              "token is checked", n, o_.max_hello_bytes));
  std::string body(n, '\0');
  if (Status st = c->sock.RecvAll(body.data(), n); !st.ok()) return st;
  std::string_view in = body;
  std::string token;
  LinkHello h;
  if (in.size() < sizeof(kMagic) || std::memcmp(in.data(), kMagic, sizeof(kMagic)) != 0)
    return refuse("not an object link (bad magic)");
  in.remove_prefix(sizeof(kMagic));
  if (!GetString(&in, &token) || !GetString(&in, &h.channel) || !GetPod(&in, &h.consumer) ||
      !GetPod(&in, &h.from_node) || !in.empty())
    return refuse("a malformed hello");
  if (!TokensEqual(token, o_.token)) return refuse("wrong token");
  Result<Inbound> r = resolve_(h);
  if (!r.ok()) return refuse(r.status().message());
  c->in = std::move(*r);
  c->name = c->in.name;
  if (Status st = SendBlob(c->sock, std::string(1, '\1')); !st.ok()) return st;
  SetRecvTimeout(c->sock, Duration::zero());
  {
    std::lock_guard lock(c->write_mu);
    c->authed = true;
  }
  TLOG_DEBUG("object link {} connected", c->name);
  return Status::Ok();
}

Status LinkListener::Stream(Conn* c) {
  const std::function<bool()> stopping = [this] { return stopping_.load(); };
  auto broke = [&](const Status& why) {
    if (!c->closed_sent) Fail(UnavailableError("object link {} broke before its end of "
                                                          "stream: {}", c->name, why.message()));
    return why;
  };
  while (true) {
    FrameHeader h;
    bool eof = false;
    if (Status st = c->sock.RecvAll(&h, sizeof(h), &eof); !st.ok()) return broke(st);
    if (h.type == kEnd) {
      std::vector<int32_t> ps(h.meta_bytes / sizeof(int32_t));
      if (h.meta_bytes > 4096 * sizeof(int32_t) || h.meta_bytes % sizeof(int32_t) != 0)
        return broke(DataLossError("an end frame of {} bytes", h.meta_bytes));
      if (Status st = c->sock.RecvAll(ps.data(), h.meta_bytes); !st.ok()) return broke(st);
      for (int32_t p : ps) {
        if (std::find(c->in.producers.begin(), c->in.producers.end(), p) == c->in.producers.end())
          return broke(DataLossError("the end names producer {}, which the link does not carry", p));
        if (Status st = c->in.port->channel().FinishProducer(p); !st.ok()) return broke(st);
      }
      {
        std::lock_guard lock(mu_);
        ++ended_;
      }
      TLOG_DEBUG("object link {} ended", c->name);
      c->sock.ShutdownWrite();  // every ack is out: the sender sees a clean end
      return Status::Ok();
    }
    if (h.type != kItem) return broke(DataLossError("an unknown frame type {}", h.type));
    if (h.meta_bytes > o_.max_item_bytes || h.payload_bytes > o_.max_item_bytes - h.meta_bytes)
      return broke(DataLossError("an item of {} + {} bytes is over the {}-byte limit",
                                 h.meta_bytes, h.payload_bytes, o_.max_item_bytes));
    if (std::find(c->in.producers.begin(), c->in.producers.end(), h.producer) ==
        c->in.producers.end())
      return broke(DataLossError("an item of producer {}, which the link does not carry",
                                 h.producer));
    std::string meta(h.meta_bytes, '\0');
    if (Status st = c->sock.RecvAll(meta.data(), meta.size()); !st.ok()) return broke(st);
    WireReader reader(meta, h.payload_bytes, store_, "link " + c->name,
                      [c](uint8_t* dst, uint64_t n) { return c->sock.RecvAll(dst, n); });
    Status pushed = c->in.port->Push(h.producer, h.seq, reader, stopping);
    if (pushed.code() == StatusCode::kUnavailable && reader.Finish().ok()) {
      c->SendClosed();  // the consumer is gone; the item was dropped
    } else if (pushed.code() == StatusCode::kCancelled) {
      return pushed;
    } else if (!pushed.ok()) {
      return broke(pushed);
    }
    FrameHeader ack;
    ack.type = kAck;
    ack.producer = h.producer;
    ack.seq = h.seq;
    if (Status st = c->Send(ack); !st.ok()) return broke(st);
  }
}

void LinkListener::Stop() {
  std::vector<Conn*> conns;
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    for (auto& c : conns_) conns.push_back(c.get());
  }
  for (Conn* c : conns) c->SendClosed();
  {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, o_.stop_grace, [&] {
      return std::all_of(conns.begin(), conns.end(), [](Conn* c) { return c->finished.load(); });
    });
  }
  stopping_.store(true);
  listener_.Shutdown();
  for (Conn* c : conns) c->sock.Shutdown();
  if (acceptor_.joinable()) acceptor_.join();
  std::lock_guard lock(mu_);
  for (auto& c : conns_) {
    c->sock.Shutdown();
    if (c->thread.joinable()) c->thread.join();
  }
}

// ---------------------------------------------------------------------------------------
// Sending side.

LinkSender::LinkSender(Socket s, LinkOptions options, std::string name, std::string peer,
                       LinkFailureFn on_failure)
    : sock_(std::move(s)),
      o_(std::move(options)),
      name_(std::move(name)),
      peer_(std::move(peer)),
      on_failure_(std::move(on_failure)) {}

Result<std::unique_ptr<LinkSender>> LinkSender::Connect(const std::string& host, int port,
                                                        const LinkHello& hello,
                                                        LinkOptions options, std::string peer,
                                                        LinkFailureFn on_failure) {
  if (options.token.empty()) return InvalidArgumentError("object links need the job's token");
  const std::string name =
      fmt::format("{} consumer {} (node {} -> {})", hello.channel, hello.consumer,
                  hello.from_node, peer);
  Result<Socket> s = transfer::Connect(host, port, options.connect_timeout);
  if (!s.ok()) return s.status().WithContext(fmt::format("object link {}", name));
  const std::string body = EncodeHello(hello, options.token);
  if (body.size() > options.max_hello_bytes)
    return InvalidArgumentError("object link {}: a hello of {} bytes is over the {}-byte limit",
                                name, body.size(), options.max_hello_bytes);
  SetRecvTimeout(*s, options.hello_timeout);
  Status st = SendBlob(*s, body);
  uint32_t n = 0;
  if (st.ok()) st = s->RecvAll(&n, sizeof(n));
  std::string reply;
  if (st.ok() && n > 4096) st = DataLossError("a reply of {} bytes", n);
  if (st.ok()) {
    reply.resize(n);
    st = s->RecvAll(reply.data(), n);
  }
  if (!st.ok())
    return UnavailableError("object link {}: no answer to its hello: {}", name, st.message());
  if (reply.empty() || reply[0] != '\1')
    return UnavailableError("object link {}: {} refused it: {}", name, peer,
                            reply.empty() ? "" : reply.substr(1));
  SetRecvTimeout(*s, Duration::zero());
  return std::unique_ptr<LinkSender>(
      new LinkSender(std::move(*s), std::move(options), name, peer, std::move(on_failure)));
}

LinkSender::~LinkSender() { Stop(); }

void LinkSender::Start(WirePort* port, int consumer, std::vector<int> producers, size_t window,
                       std::function<void()> on_peer_closed) {
  port_ = port;
  consumer_ = consumer;
  producers_ = std::move(producers);
  window_ = std::max<size_t>(window, 1);
  on_peer_closed_ = std::move(on_peer_closed);
  acks_ = std::thread([this] { AckLoop(); });
  forwarder_ = std::thread([this] { ForwardLoop(); });
}

size_t LinkSender::unacked() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const Held& h : unacked_) n += h.acked ? 0 : 1;
  return n;
}

bool LinkSender::done() const {
  std::lock_guard lock(mu_);
  return done_;
}

void LinkSender::Fail(const Status& why) {
  {
    std::lock_guard lock(mu_);
    if (broken_ || done_ || stopping_) {
      broken_ = true;
      cv_.notify_all();
      return;
    }
    broken_ = true;
  }
  cv_.notify_all();
  const Status s = UnavailableError("object link {} broke: {}", name_,
                                    why.message().find(peer_) == std::string::npos
                                        ? fmt::format("{}: {}", peer_, why.message())
                                        : why.message());
  TLOG_ERROR("{}", s.message());
  if (on_failure_) on_failure_(s);
}

Status LinkSender::SendEnd() {
  std::vector<int32_t> ps(producers_.begin(), producers_.end());
  FrameHeader h;
  h.type = kEnd;
  h.meta_bytes = ps.size() * sizeof(int32_t);
  struct iovec v[2] = {{&h, sizeof(h)}, {ps.data(), h.meta_bytes}};
  {
    std::lock_guard lock(mu_);
    end_sent_ = true;
  }
  return sock_.SendAll(v, 2);
}

void LinkSender::ForwardLoop() {
  while (true) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] {
        return unacked_.size() < window_ || stopping_ || broken_ || peer_closed_;
      });
      if (stopping_ || broken_) return;
      if (peer_closed_) break;
    }
    Result<OutgoingItem> item = port_->Pop(consumer_, std::chrono::milliseconds(100));
    if (!item.ok()) {
      if (item.status().code() == StatusCode::kDeadlineExceeded) continue;
      break;  // the consumer's stream here ended
    }
    FrameHeader h;
    h.type = kItem;
    h.producer = item->producer;
    h.seq = item->seq;
    h.meta_bytes = item->meta.size();
    h.payload_bytes = item->object_bytes;
    Held* entry = nullptr;
    {
      // Held before the first byte leaves (the ack may come back before SendAll returns);
      // the frame is sent from the held item, which stays put until it is sent and acked.
      std::lock_guard lock(mu_);
      unacked_.push_back(Held{std::move(*item)});
      entry = &unacked_.back();
    }
    const OutgoingItem* held = &entry->item;
    std::vector<struct iovec> v;
    v.reserve(2 + held->objects.size());
    v.push_back({&h, sizeof(h)});
    v.push_back({const_cast<char*>(held->meta.data()), held->meta.size()});
    for (const WireSpan& s : held->objects)
      v.push_back({const_cast<uint8_t*>(s.data), static_cast<size_t>(s.size)});
    if (Status st = sock_.SendAll(v.data(), static_cast<int>(v.size())); !st.ok()) {
      Fail(st);
      return;
    }
    {
      std::lock_guard lock(mu_);
      entry->sent = true;
      ReleaseDoneLocked();
    }
    cv_.notify_all();
  }
  if (Status st = SendEnd(); !st.ok()) Fail(st);
}

void LinkSender::AckLoop() {
  bool told_closed = false;
  while (true) {
    FrameHeader h;
    bool eof = false;
    Status st = sock_.RecvAll(&h, sizeof(h), &eof);
    if (!st.ok()) {
      std::unique_lock lock(mu_);
      // The receiver closes after the end (or once its consumer is gone and the end came).
      const bool clean = eof && end_sent_ && (unacked_.empty() || peer_closed_);
      if (clean || peer_closed_ || stopping_) {
        done_ = done_ || clean || peer_closed_;  // Stop() drops what is left held
        lock.unlock();
        cv_.notify_all();
        return;
      }
      lock.unlock();
      Fail(eof ? UnavailableError("{} closed the connection before the end of stream", peer_)
               : st);
      return;
    }
    if (h.type == kAck) {
      std::unique_lock lock(mu_);
      auto next = std::find_if(unacked_.begin(), unacked_.end(),
                               [](const Held& e) { return !e.acked; });
      if (next == unacked_.end() || next->item.seq != h.seq ||
          next->item.producer != h.producer) {
        lock.unlock();
        Fail(DataLossError("an acknowledgement of producer {}'s item {} out of order", h.producer,
                           h.seq));
        return;
      }
      next->acked = true;
      ReleaseDoneLocked();  // the hold goes: the fence over the wire completes
      last_progress_ = SteadyClock::now();
    } else if (h.type == kClosed) {
      {
        std::lock_guard lock(mu_);
        peer_closed_ = true;
        last_progress_ = SteadyClock::now();
      }
      if (!told_closed && on_peer_closed_) on_peer_closed_();
      told_closed = true;
    } else {
      Fail(DataLossError("an unknown frame type {} from the receiver", h.type));
      return;
    }
    cv_.notify_all();
  }
}

void LinkSender::ReleaseDoneLocked() {
  while (!unacked_.empty() && unacked_.front().sent && unacked_.front().acked)
    unacked_.pop_front();
}

void LinkSender::Stop() {
  {
    std::unique_lock lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    // A link still making progress (the receiver acknowledging) is given the time it needs;
    // one that has made none for stop_grace is cut.
    last_progress_ = SteadyClock::now();
    while (!(done_ || broken_ || !acks_.joinable()) &&
           SteadyClock::now() - last_progress_ < o_.stop_grace)
      cv_.wait_for(lock, std::chrono::milliseconds(200));
    stopping_ = true;
  }
  cv_.notify_all();
  sock_.Shutdown();
  if (forwarder_.joinable()) forwarder_.join();
  if (acks_.joinable()) acks_.join();
  std::lock_guard lock(mu_);
  unacked_.clear();
}

}  // namespace tandem::transfer
