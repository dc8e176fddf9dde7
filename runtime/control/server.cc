#include "runtime/control/server.h"

#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <future>
#include <optional>
#include <thread>

#include "runtime/control/asio.h"
#include "runtime/core/logging.h"

namespace tandem {

namespace asio = boost::asio;
using LocalProtocol = asio::local::stream_protocol;
using Tcp = asio::ip::tcp;

namespace {

// Compares without an early exit, so the time taken does not reveal a token's prefix.
bool SameToken(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

Status FromAsio(const boost::system::error_code& ec, const std::string& what) {
  return UnavailableError("{}: {}", what, ec.message());
}

// One connection: reads frames and answers them until the peer closes or a frame is bad.
template <typename Socket>
class Session : public std::enable_shared_from_this<Session<Socket>> {
 public:
  Session(Socket socket, const ControlServer::Handler* handler, const std::string* token)
      : socket_(std::move(socket)), handler_(handler), token_(token) {}

  void Begin() { ReadHeader(); }

 private:
  void ReadHeader() {
    auto self = this->shared_from_this();
    asio::async_read(socket_, asio::buffer(header_),
                     [self](const boost::system::error_code& ec, size_t) {
                       if (ec) return;  // peer closed or server stopping
                       Result<uint32_t> size = ParseFrameHeader(self->header_);
                       if (!size.ok()) {
                         self->Reply(ControlResponse::Error(size.status()), /*close=*/true);
                         return;
                       }
                       self->ReadPayload(*size);
                     });
  }

  void ReadPayload(uint32_t size) {
    payload_.assign(size, '\0');
    auto self = this->shared_from_this();
    asio::async_read(socket_, asio::buffer(payload_),
                     [self](const boost::system::error_code& ec, size_t) {
                       if (ec) return;
                       self->Dispatch();
                     });
  }

  void Dispatch() {
    Result<ControlRequest> req = DecodeRequest(payload_);
    if (!req.ok()) {
      Reply(ControlResponse::Error(req.status()), /*close=*/true);
      return;
    }
    if (token_ != nullptr && !SameToken(req->token, *token_)) {
      Reply(ControlResponse::Error(InvalidArgumentError(
                "unauthenticated: wrong or missing token (set TANDEM_TOKEN or the token file)")),
            /*close=*/false);
      return;
    }
    Reply((*handler_)(*req), /*close=*/false);
  }

  void Reply(const ControlResponse& resp, bool close) {
    out_ = EncodeResponse(resp);
    auto self = this->shared_from_this();
    asio::async_write(socket_, asio::buffer(out_),
                      [self, close](const boost::system::error_code& ec, size_t) {
                        if (ec) return;
                        if (close) {
                          boost::system::error_code ignored;
                          self->socket_.shutdown(Socket::shutdown_both, ignored);
                          return;
                        }
                        self->ReadHeader();
                      });
  }

  Socket socket_;
  const ControlServer::Handler* handler_;
  const std::string* token_;  // nullptr: no token needed (Unix socket)
  std::array<uint8_t, kFrameHeaderBytes> header_{};
  std::string payload_;
  std::string out_;
};

// One HTTP/1.0 exchange on the metrics port: GET /metrics, or 404.
class MetricsSession : public std::enable_shared_from_this<MetricsSession> {
 public:
  MetricsSession(Tcp::socket socket, const ControlServer::MetricsFn* fn)
      : socket_(std::move(socket)), fn_(fn), request_(8192) {}

  void Begin() {
    auto self = shared_from_this();
    asio::async_read_until(socket_, request_, "\r\n\r\n",
                           [self](const boost::system::error_code& ec, size_t) {
                             if (ec) return;
                             std::string head(asio::buffers_begin(self->request_.data()),
                                              asio::buffers_end(self->request_.data()));
                             self->Answer(head.rfind("GET /metrics", 0) == 0);
                           });
  }

 private:
  void Answer(bool found) {
    std::string body = found ? (*fn_)() : "not found: try GET /metrics\n";
    out_ = std::string(found ? "HTTP/1.0 200 OK\r\n" : "HTTP/1.0 404 Not Found\r\n") +
           "Content-Type: text/plain; version=0.0.4\r\nContent-Length: " +
           std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body;
    auto self = shared_from_this();
    asio::async_write(socket_, asio::buffer(out_),
                      [self](const boost::system::error_code&, size_t) {
                        boost::system::error_code ignored;
                        self->socket_.shutdown(Tcp::socket::shutdown_both, ignored);
                      });
  }

  Tcp::socket socket_;
  const ControlServer::MetricsFn* fn_;
  asio::streambuf request_;
  std::string out_;
};

}  // namespace

class ControlServer::Impl {
 public:
  Impl(ServerOptions options, Handler handler, MetricsFn metrics)
      : options_(std::move(options)), handler_(std::move(handler)), metrics_(std::move(metrics)) {}

  Status Bind() {
    boost::system::error_code ec;
    if (!options_.unix_path.empty()) {
      ::unlink(options_.unix_path.c_str());
      unix_.emplace(io_);
      LocalProtocol::endpoint ep(options_.unix_path);
      unix_->open(ep.protocol(), ec);
      if (!ec) unix_->bind(ep, ec);
      if (!ec) unix_->listen(asio::socket_base::max_listen_connections, ec);
      if (ec) return FromAsio(ec, "cannot listen on " + options_.unix_path);
      ::chmod(options_.unix_path.c_str(), 0600);
    }
    if (options_.tcp_port >= 0) {
      if (options_.token.empty())
        return InvalidArgumentError("TCP control needs a token (TANDEM_TOKEN or a token file)");
      ASSIGN_OR_RETURN(tcp_port_, ListenTcp(tcp_, options_.tcp_host, options_.tcp_port));
    }
    if (options_.metrics_port >= 0 && metrics_) {
      ASSIGN_OR_RETURN(metrics_port_,
                       ListenTcp(metrics_acceptor_, options_.metrics_host, options_.metrics_port));
    }
    return Status::Ok();
  }

  void Run() {
    if (unix_) AcceptControl(*unix_, nullptr);
    if (tcp_) AcceptControl(*tcp_, &options_.token);
    if (metrics_acceptor_) AcceptMetrics();
    thread_ = std::thread([this] {
      log::SetThreadPrefix("control");
      io_.run();
      exited_.set_value();
    });
  }

  // Closes the acceptors, lets replies being written finish (the I/O thread ends once no
  // connection has work left), and cuts connections still open after a grace period.
  void Stop() {
    if (!thread_.joinable()) return;
    asio::post(io_, [this] {
      boost::system::error_code ignored;
      if (unix_) unix_->close(ignored);
      if (tcp_) tcp_->close(ignored);
      if (metrics_acceptor_) metrics_acceptor_->close(ignored);
    });
    if (exited_.get_future().wait_for(std::chrono::seconds(1)) != std::future_status::ready)
      io_.stop();
    thread_.join();
    if (!options_.unix_path.empty()) ::unlink(options_.unix_path.c_str());
  }

  int tcp_port_ = -1;
  int metrics_port_ = -1;

 private:
  Result<int> ListenTcp(std::optional<Tcp::acceptor>& acceptor, const std::string& host, int port) {
    boost::system::error_code ec;
    auto addr = asio::ip::make_address(host, ec);
    if (ec) return InvalidArgumentError("bad listen address '{}': {}", host, ec.message());
    Tcp::endpoint ep(addr, static_cast<unsigned short>(port));
    acceptor.emplace(io_);
    acceptor->open(ep.protocol(), ec);
    if (!ec) acceptor->set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor->bind(ep, ec);
    if (!ec) acceptor->listen(asio::socket_base::max_listen_connections, ec);
    if (ec) return FromAsio(ec, fmt::format("cannot listen on {}:{}", host, port));
    return static_cast<int>(acceptor->local_endpoint().port());
  }

  template <typename Acceptor>
  void AcceptControl(Acceptor& acceptor, const std::string* token) {
    acceptor.async_accept([this, &acceptor, token](const boost::system::error_code& ec,
                                                   typename Acceptor::protocol_type::socket s) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec) {
        using Socket = typename Acceptor::protocol_type::socket;
        std::make_shared<Session<Socket>>(std::move(s), &handler_, token)->Begin();
      }
      AcceptControl(acceptor, token);
    });
  }

  void AcceptMetrics() {
    metrics_acceptor_->async_accept([this](const boost::system::error_code& ec, Tcp::socket s) {
      if (ec == asio::error::operation_aborted) return;
      if (!ec) std::make_shared<MetricsSession>(std::move(s), &metrics_)->Begin();
      AcceptMetrics();
    });
  }

  ServerOptions options_;
  Handler handler_;
  MetricsFn metrics_;
  asio::io_context io_;
  std::optional<LocalProtocol::acceptor> unix_;
  std::optional<Tcp::acceptor> tcp_;
  std::optional<Tcp::acceptor> metrics_acceptor_;
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
void ControlServer::Stop() { impl_->Stop(); }

}  // namespace tandem
