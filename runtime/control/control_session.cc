// One control connection (see server.h for the rules it enforces): reads frames, reading
// each payload chunk by chunk as it arrives and charging it to the server's pending budget,
// checks the token on TCP, hands the request to the handler and writes its reply.
#include <algorithm>
#include <array>
#include <atomic>
#include <vector>

#include "runtime/control/server_core.h"
#include "runtime/core/logging.h"

namespace tandem::control_internal {
namespace {

constexpr size_t kReadChunkBytes = 64u << 10;

std::string PeerName(const asio::local::stream_protocol::socket&) { return "unix socket"; }

std::string PeerName(const asio::ip::tcp::socket& s) {
  boost::system::error_code ec;
  auto ep = s.remote_endpoint(ec);
  if (ec) return "tcp peer";
  return fmt::format("{}:{}", ep.address().to_string(), ep.port());
}

// Compares without an early exit, so the time taken does not reveal a token's prefix.
bool SameToken(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

template <typename Socket>
class Session : public std::enable_shared_from_this<Session<Socket>> {
 public:
  Session(Socket socket, ServerCore* core, ConnectionSlot slot, bool needs_token)
      : socket_(std::move(socket)),
        core_(core),
        slot_(std::move(slot)),
        needs_token_(needs_token),
        deadline_(socket_.get_executor()),
        penalty_(socket_.get_executor()) {}
  ~Session() {
    core_->Release(reserved_);
    Authenticated();
  }

  void Begin() {
    if (needs_token_) {  // TCP: counted as waiting for the token until a request shows it
      unauthenticated_id_ = ++core_->next_unauthenticated;
      std::weak_ptr<Session> weak = this->shared_from_this();
      core_->unauthenticated[unauthenticated_id_] = [weak] {
        if (auto self = weak.lock()) self->Close();
      };
    }
    ArmDeadline();
    ReadHeader();
  }

 private:
  void ReadHeader() {
    auto self = this->shared_from_this();
    asio::async_read(socket_, asio::buffer(header_),
                     [self](const boost::system::error_code& ec, size_t) {
                       if (ec) return self->Close();  // peer closed, timed out or server stopping
                       self->OnHeader();
                     });
  }

  void OnHeader() {
    Result<uint32_t> size = ParseFrameHeader(header_);
    if (!size.ok()) return Write(ControlResponse::Error(size.status()), /*close=*/true);
    if (needs_token_ && !authenticated_ && *size > kMaxUnauthenticatedFrameBytes) {
      return Write(ControlResponse::Unauthenticated(InvalidArgumentError(
                       "unauthenticated: the first request on a TCP connection must carry the "
                       "token and be at most {} bytes (this one announces {})",
                       kMaxUnauthenticatedFrameBytes, *size)),
                   /*close=*/true);
    }
    if (*size > core_->limits.max_request_bytes) {
      return Write(ControlResponse::Error(InvalidArgumentError(
                       "request of {} bytes exceeds the limit of {} bytes", *size,
                       core_->limits.max_request_bytes)),
                   /*close=*/true);
    }
    expected_ = *size;
    payload_.clear();
    ReadChunk();
  }

  // Reads the payload as it arrives; memory grows with the bytes received, each growth
  // charged to the server's budget first.
  void ReadChunk() {
    if (payload_.size() == expected_) return Dispatch();
    const size_t have = payload_.size();
    if (have == reserved_) {  // full: grow by a chunk, or double, never past the frame
      const size_t want = std::min(expected_, std::max(have + kReadChunkBytes, 2 * reserved_));
      if (!core_->Reserve(want - reserved_)) {
        TLOG_WARN("control: refusing a request from {}: {} request bytes pending, the limit is {}",
                  PeerName(socket_), core_->pending_bytes, core_->limits.max_pending_bytes);
        return Write(ControlResponse::Error(UnavailableError(
                         "server busy: too many request bytes pending (limit {}); retry later",
                         core_->limits.max_pending_bytes)),
                     /*close=*/true);
      }
      reserved_ = want;
      payload_.reserve(want);
    }
    const size_t chunk = std::min(kReadChunkBytes, reserved_ - have);
    payload_.resize(have + chunk);
    auto self = this->shared_from_this();
    socket_.async_read_some(asio::buffer(payload_.data() + have, chunk),
                            [self, have](const boost::system::error_code& ec, size_t n) {
                              if (ec) return self->Close();
                              self->payload_.resize(have + n);
                              self->ReadChunk();
                            });
  }

  void Dispatch() {
    DisarmDeadline();
    Result<ControlRequest> req = DecodeRequest(payload_);
    payload_ = std::string();  // the request holds its own copy; reserved_ still counts it
    if (!req.ok()) return Write(ControlResponse::Error(req.status()), /*close=*/true);
    if (needs_token_ && !SameToken(req->token, core_->token)) return RejectToken();
    authenticated_ = true;
    Authenticated();
    auto self = this->shared_from_this();
    core_->waiting[this] = self;
    std::weak_ptr<Session> weak = self;
    auto once = std::make_shared<std::atomic<bool>>(false);
    std::shared_ptr<ReplyGate> gate = core_->gate;
    core_->handler(std::move(*req), [weak, once, gate](ControlResponse resp) {
      if (once->exchange(true)) return;  // a second reply to one request is ignored
      gate->Post([weak, resp = std::move(resp)]() mutable {
        if (auto s = weak.lock()) s->Write(std::move(resp), /*close=*/false);
      });
    });
  }

  // A failed token check: logged, answered after a delay that grows with recent failures,
  // and the connection closed.
  void RejectToken() {
    AuthFailures::Verdict v = core_->auth_failures.Record(SteadyClock::now(), core_->limits);
    ++core_->auth_failures_total;
    if (v.log) {
      TLOG_WARN("control: token check failed for a request from {} ({} failures in the last "
                "minute; replies are delayed {} ms)",
                PeerName(socket_), v.recent,
                std::chrono::duration_cast<std::chrono::milliseconds>(v.delay).count());
    }
    auto self = this->shared_from_this();
    penalty_.expires_after(v.delay);
    penalty_.async_wait([self](const boost::system::error_code& ec) {
      if (ec) return self->Close();
      self->Write(ControlResponse::Unauthenticated(InvalidArgumentError(
                      "unauthenticated: wrong or missing token (set TANDEM_TOKEN or the token "
                      "file)")),
                  /*close=*/true);
    });
  }

  void Write(ControlResponse resp, bool close) {
    auto self = this->shared_from_this();
    core_->waiting.erase(this);
    core_->Release(reserved_);
    reserved_ = 0;
    out_ = EncodeResponse(resp);
    ArmDeadline();  // a client that does not read its reply is cut off too
    asio::async_write(socket_, asio::buffer(out_),
                      [self, close](const boost::system::error_code& ec, size_t) {
                        self->out_ = std::string();
                        if (ec) return self->Close();
                        if (close) return self->Linger();
                        self->ArmDeadline();
                        self->ReadHeader();
                      });
  }

  // Ends a connection after a final reply without losing it: closing with unread input
  // would send a reset that can discard the reply at the client, so stop sending, read and
  // drop what the client still sends (up to kReadChunkBytes, within the deadline), then close.
  void Linger() {
    boost::system::error_code ignored;
    socket_.shutdown(Socket::shutdown_send, ignored);
    drain_.resize(4096);
    Drain(0);
  }

  void Drain(size_t drained) {
    auto self = this->shared_from_this();
    socket_.async_read_some(asio::buffer(drain_),
                            [self, drained](const boost::system::error_code& ec, size_t n) {
                              if (ec || drained + n > kReadChunkBytes) return self->Close();
                              self->Drain(drained + n);
                            });
  }

  void ArmDeadline() {
    const uint64_t gen = ++deadline_gen_;
    std::weak_ptr<Session> weak = this->shared_from_this();
    deadline_.expires_after(core_->limits.idle_timeout);
    deadline_.async_wait([weak, gen](const boost::system::error_code& ec) {
      auto s = weak.lock();
      if (ec || !s || s->deadline_gen_ != gen) return;  // cancelled, gone, or re-armed since
      TLOG_DEBUG("control: closing a connection from {} that was idle for {:.1f}s",
                 PeerName(s->socket_),
                 std::chrono::duration<double>(s->core_->limits.idle_timeout).count());
      s->Close();
    });
  }

  // No longer counted as waiting for the token (or evicted already).
  void Authenticated() {
    if (unauthenticated_id_ != 0) core_->unauthenticated.erase(unauthenticated_id_);
    unauthenticated_id_ = 0;
  }

  void DisarmDeadline() {
    ++deadline_gen_;
    deadline_.cancel();
  }

  void Close() {
    DisarmDeadline();
    penalty_.cancel();
    boost::system::error_code ignored;
    socket_.shutdown(Socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  Socket socket_;
  ServerCore* const core_;
  ConnectionSlot slot_;
  uint64_t unauthenticated_id_ = 0;  // its entry in core_->unauthenticated, 0: none
  const bool needs_token_;
  bool authenticated_ = false;
  asio::steady_timer deadline_;
  uint64_t deadline_gen_ = 0;
  asio::steady_timer penalty_;
  std::array<uint8_t, kFrameHeaderBytes> header_{};
  size_t expected_ = 0;
  size_t reserved_ = 0;  // bytes of the budget this connection holds
  std::string payload_;
  std::string out_;
  std::vector<char> drain_;
};

}  // namespace

void StartControlSession(asio::local::stream_protocol::socket socket, ServerCore* core,
                         ConnectionSlot slot) {
  using S = asio::local::stream_protocol::socket;
  std::make_shared<Session<S>>(std::move(socket), core, std::move(slot), /*needs_token=*/false)
      ->Begin();
}

void StartControlSession(asio::ip::tcp::socket socket, ServerCore* core, ConnectionSlot slot) {
  using S = asio::ip::tcp::socket;
  std::make_shared<Session<S>>(std::move(socket), core, std::move(slot), /*needs_token=*/true)
      ->Begin();
}

bool ReplyGate::Post(std::function<void()> fn) {
  std::lock_guard<std::mutex> lock(mu_);
  if (io_ == nullptr) return false;
  asio::post(*io_, std::move(fn));
  return true;
}

void ReplyGate::Close() {
  std::lock_guard<std::mutex> lock(mu_);
  io_ = nullptr;
}

AuthFailures::Verdict AuthFailures::Record(TimePoint now, const ServerLimits& limits) {
  while (!recent_.empty() && now - recent_.front() > std::chrono::minutes(1)) recent_.pop_front();
  if (recent_.size() < 10000) recent_.push_back(now);
  Verdict v;
  v.recent = recent_.size();
  Duration delay = limits.auth_failure_delay;
  for (size_t i = 1; i < v.recent && delay < limits.max_auth_failure_delay; ++i) delay *= 2;
  v.delay = std::min(delay, limits.max_auth_failure_delay);
  v.log = v.recent <= 5 || v.recent % 50 == 0;
  return v;
}

}  // namespace tandem::control_internal
