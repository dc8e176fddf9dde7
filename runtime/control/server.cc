#include "runtime/control/server.h"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <future>
#include <optional>
#include <thread>

#include "runtime/control/metrics_http.h"
#include "runtime/control/server_core.h"
#include "runtime/core/logging.h"

namespace tandem {

namespace asio = boost::asio;
using LocalProtocol = asio::local::stream_protocol;
using Tcp = asio::ip::tcp;
using namespace control_internal;

namespace {

Status FromAsio(const boost::system::error_code& ec, const std::string& what) {
  return UnavailableError("{}: {}", what, ec.message());
}

constexpr Duration kFirstAcceptRetry = std::chrono::milliseconds(10);
constexpr Duration kMaxAcceptRetry = std::chrono::seconds(1);

// One listening endpoint: accepts connections up to the limit and hands each to `serve`.
// When accept() fails (EMFILE, ENFILE, ENOBUFS) it retries after a backoff that doubles up
// to a second, rather than spinning on a connection it cannot take.
template <typename Protocol>
class Listener {
 public:
  using Socket = typename Protocol::socket;
  using Serve = std::function<void(Socket, ConnectionSlot)>;

  Listener(asio::io_context& io, std::string name, ServerCore* core, ListenerId id,
           std::string refusal, Serve serve)
      : acceptor(io),
        name_(std::move(name)),
        core_(core),
        id_(id),
        refusal_(std::move(refusal)),
        serve_(std::move(serve)),
        retry_(io) {}

  void Accept() {
    acceptor.async_accept([this](const boost::system::error_code& ec, Socket s) {
      if (ec == asio::error::operation_aborted || !acceptor.is_open()) return;
      if (ec) return BackOff(ec);
      if (failures_ > 0) {
        TLOG_INFO("control: accepting on {} again after {} failed attempts", name_, failures_);
        failures_ = 0;
      }
      if (core_->connections[id_] >= core_->limits.max_connections) {
        TLOG_DEBUG("control: refusing a connection on {}: {} open (the limit)", name_,
                   core_->connections[id_]);
        ++core_->refused_connections;
        RefuseConnection(s, refusal_);
      } else {
        // The oldest connection still without the token makes room: peers that never show it
        // cannot hold the slots, and a client that sends its request at once is not kept out.
        while (id_ == kTcpListener &&
               core_->unauthenticated.size() >= core_->limits.max_unauthenticated) {
          auto oldest = core_->unauthenticated.begin();
          std::function<void()> close = std::move(oldest->second);
          core_->unauthenticated.erase(oldest);
          ++core_->evicted_unauthenticated;
          close();
        }
        serve_(std::move(s), ConnectionSlot(&core_->connections[id_]));
      }
      Accept();
    });
  }

  void Close() {
    boost::system::error_code ignored;
    acceptor.close(ignored);
    retry_.cancel();
  }

  typename Protocol::acceptor acceptor;

 private:
  void BackOff(const boost::system::error_code& ec) {
    ++core_->accept_failures;
    backoff_ = failures_ == 0 ? kFirstAcceptRetry : std::min(backoff_ * 2, kMaxAcceptRetry);
    if (failures_++ == 0) {
      TLOG_WARN("control: accept on {} failed: {}; retrying with a backoff of up to {} ms",
                name_, ec.message(),
                std::chrono::duration_cast<std::chrono::milliseconds>(kMaxAcceptRetry).count());
    }
    retry_.expires_after(backoff_);
    retry_.async_wait([this](const boost::system::error_code& wait_ec) {
      if (!wait_ec && acceptor.is_open()) Accept();
    });
  }

  const std::string name_;
  ServerCore* const core_;
  const ListenerId id_;
  const std::string refusal_;  // written to a connection over the limit
  Serve serve_;
  asio::steady_timer retry_;
  Duration backoff_{};
  int failures_ = 0;
};

// Leaves room for the jobs' own files: connections may take half the open-file limit.
size_t ConnectionsThatFit(size_t listeners) {
  struct rlimit rl {};
  if (::getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return SIZE_MAX;
  return std::max<size_t>(4, static_cast<size_t>(rl.rlim_cur) / 2 / std::max<size_t>(1, listeners));
}

}  // namespace

Status ServerLimits::Check() const {
  if (max_connections == 0) return InvalidArgumentError("max_connections must be at least 1");
  if (max_unauthenticated == 0)
    return InvalidArgumentError("max_unauthenticated must be at least 1");
  if (max_request_bytes == 0 || max_request_bytes > kMaxFrameBytes)
    return InvalidArgumentError("max_request_bytes must be in [1, {}], got {}", kMaxFrameBytes,
                                max_request_bytes);
  if (max_pending_bytes < max_request_bytes)
    return InvalidArgumentError("max_pending_bytes ({}) must be at least max_request_bytes ({})",
                                max_pending_bytes, max_request_bytes);
  if (idle_timeout <= Duration::zero())
    return InvalidArgumentError("idle_timeout must be positive");
  if (auth_failure_delay < Duration::zero() || max_auth_failure_delay < auth_failure_delay)
    return InvalidArgumentError("auth failure delays must satisfy 0 <= delay <= max delay");
  return Status::Ok();
}

ControlServer::Handler ControlServer::Inline(
    std::function<ControlResponse(const ControlRequest&)> fn) {
  return [fn = std::move(fn)](ControlRequest req, Reply reply) { reply(fn(req)); };
}

class ControlServer::Impl {
 public:
  Impl(ServerOptions options, Handler handler, MetricsFn metrics) : options_(std::move(options)) {
    core_.limits = options_.limits;
    core_.handler = std::move(handler);
    core_.metrics = std::move(metrics);
    core_.token = options_.token;
    core_.gate = std::make_shared<ReplyGate>(&io_);
  }
  ~Impl() { Stop(); }

  Status Bind() {
    RETURN_IF_ERROR(options_.limits.Check());
    if (options_.tcp_port >= 0 && options_.token.empty())
      return InvalidArgumentError("TCP control needs a token (TANDEM_TOKEN or a token file)");
    const size_t listeners = (options_.unix_path.empty() ? 0 : 1) + (options_.tcp_port >= 0 ? 1 : 0) +
                             (options_.metrics_port >= 0 && core_.metrics ? 1 : 0);
    const size_t fit = ConnectionsThatFit(listeners);
    if (core_.limits.max_connections > fit) {
      TLOG_WARN("control: max_connections {} lowered to {} to fit the open-file limit "
                "(ulimit -n)", core_.limits.max_connections, fit);
      core_.limits.max_connections = fit;
    }
    // At most a quarter of the TCP slots wait for a token; the rest stay for clients with it.
    core_.limits.max_unauthenticated =
        std::min(core_.limits.max_unauthenticated,
                 std::max<size_t>(1, core_.limits.max_connections / 4));
    const std::string busy = EncodeResponse(ControlResponse::Error(UnavailableError(
        "server busy: {} connections open (the limit); retry later", core_.limits.max_connections)));
    if (!options_.unix_path.empty()) {
      unix_.emplace(io_, options_.unix_path, &core_, kUnixListener, busy,
                    [this](LocalProtocol::socket s, ConnectionSlot slot) {
                      StartControlSession(std::move(s), &core_, std::move(slot));
                    });
      ::unlink(options_.unix_path.c_str());
      boost::system::error_code ec;
      LocalProtocol::endpoint ep(options_.unix_path);
      unix_->acceptor.open(ep.protocol(), ec);
      if (!ec) unix_->acceptor.bind(ep, ec);
      if (!ec) unix_->acceptor.listen(asio::socket_base::max_listen_connections, ec);
      if (ec) return FromAsio(ec, "cannot listen on " + options_.unix_path);
      ::chmod(options_.unix_path.c_str(), 0600);
    }
    if (options_.tcp_port >= 0) {
      tcp_.emplace(io_, "tcp", &core_, kTcpListener, busy,
                   [this](Tcp::socket s, ConnectionSlot slot) {
                     StartControlSession(std::move(s), &core_, std::move(slot));
                   });
      ASSIGN_OR_RETURN(tcp_port_, ListenTcp(tcp_->acceptor, options_.tcp_host, options_.tcp_port));
    }
    if (options_.metrics_port >= 0 && core_.metrics) {
      HttpAnswer unavailable;
      unavailable.code = 503;
      metrics_.emplace(io_, "metrics", &core_, kMetricsListener,
                       FormatHttpResponse(unavailable, ""),
                       [this](Tcp::socket s, ConnectionSlot slot) {
                         StartMetricsSession(std::move(s), &core_, std::move(slot));
                       });
      ASSIGN_OR_RETURN(metrics_port_, ListenTcp(metrics_->acceptor, options_.metrics_host,
                                                options_.metrics_port));
    }
    return Status::Ok();
  }

  void Run() {
    if (unix_) unix_->Accept();
    if (tcp_) tcp_->Accept();
    if (metrics_) metrics_->Accept();
    thread_ = std::thread([this] {
      log::SetThreadPrefix("control");
      io_.run();
      exited_.set_value();
    });
  }

  // Closes the listeners, lets replies being written finish (the I/O thread ends once no
  // connection has work left), and cuts connections still open after a grace period.
  void Stop() {
    if (!thread_.joinable()) return;
    asio::post(io_, [this] {
      if (unix_) unix_->Close();
      if (tcp_) tcp_->Close();
      if (metrics_) metrics_->Close();
    });
    if (exited_.get_future().wait_for(std::chrono::seconds(1)) != std::future_status::ready)
      io_.stop();
    thread_.join();
    core_.gate->Close();
    core_.waiting.clear();  // while io_ exists: their sockets belong to it
    if (!options_.unix_path.empty()) ::unlink(options_.unix_path.c_str());
  }

  ServerStats Stats() {
    auto take = [this] {
      ServerStats st;
      st.connections = core_.connections[kUnixListener] + core_.connections[kTcpListener];
      st.unauthenticated = core_.unauthenticated.size();
      st.evicted_unauthenticated = core_.evicted_unauthenticated;
      st.pending_bytes = core_.pending_bytes;
      st.refused_connections = core_.refused_connections;
      st.accept_failures = core_.accept_failures;
      st.auth_failures = core_.auth_failures_total;
      return st;
    };
    if (!thread_.joinable()) return ServerStats{};
    auto p = std::make_shared<std::promise<ServerStats>>();
    auto f = p->get_future();
    asio::post(io_, [p, take] { p->set_value(take()); });
    if (f.wait_for(std::chrono::seconds(30)) != std::future_status::ready) return ServerStats{};
    return f.get();
  }

  int tcp_port_ = -1;
  int metrics_port_ = -1;
  ServerCore core_;  // before io_: sessions destroyed with io_ still release into it

 private:
  Result<int> ListenTcp(Tcp::acceptor& acceptor, const std::string& host, int port) {
    boost::system::error_code ec;
    auto addr = asio::ip::make_address(host, ec);
    if (ec) return InvalidArgumentError("bad listen address '{}': {}", host, ec.message());
    Tcp::endpoint ep(addr, static_cast<unsigned short>(port));
    acceptor.open(ep.protocol(), ec);
    if (!ec) acceptor.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor.bind(ep, ec);
    if (!ec) acceptor.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return FromAsio(ec, fmt::format("cannot listen on {}:{}", host, port));
    return static_cast<int>(acceptor.local_endpoint().port());
  }

  ServerOptions options_;
  asio::io_context io_;
  std::optional<Listener<LocalProtocol>> unix_;
  std::optional<Listener<Tcp>> tcp_;
  std::optional<Listener<Tcp>> metrics_;
  std::promise<void> exited_;
  std::thread thread_;
};

Result<std::unique_ptr<ControlServer>> ControlServer::Start(ServerOptions options, Handler handler,
                                                            MetricsFn metrics) {
  auto impl = std::make_unique<Impl>(std::move(options), std::move(handler), std::move(metrics));
  RETURN_IF_ERROR(impl->Bind());
  impl->Run();
  return std::unique_ptr<ControlServer>(new ControlServer(std::move(impl)));
}

ControlServer::ControlServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ControlServer::~ControlServer() { Stop(); }
int ControlServer::tcp_port() const { return impl_->tcp_port_; }
int ControlServer::metrics_port() const { return impl_->metrics_port_; }
const ServerLimits& ControlServer::limits() const { return impl_->core_.limits; }
ServerStats ControlServer::Stats() const { return impl_->Stats(); }
void ControlServer::Stop() { impl_->Stop(); }

}  // namespace tandem
