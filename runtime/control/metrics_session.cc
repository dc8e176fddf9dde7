// The metrics endpoint: one HTTP/1.0 exchange per connection, routed by RouteMetricsRequest
// (metrics_http.h).
#include <array>

#include "runtime/control/metrics_http.h"
#include "runtime/control/server_core.h"

namespace tandem {
namespace control_internal {
namespace {

using Tcp = asio::ip::tcp;

class MetricsSession : public std::enable_shared_from_this<MetricsSession> {
 public:
  MetricsSession(Tcp::socket socket, ServerCore* core, ConnectionSlot slot)
      : socket_(std::move(socket)),
        core_(core),
        slot_(std::move(slot)),
        deadline_(socket_.get_executor()),
        request_(kMaxHttpHeadBytes) {}

  void Begin() {
    std::weak_ptr<MetricsSession> weak = shared_from_this();
    deadline_.expires_after(core_->limits.idle_timeout);
    deadline_.async_wait([weak](const boost::system::error_code& ec) {
      if (auto s = weak.lock(); s && !ec) s->Close();
    });
    auto self = shared_from_this();
    asio::async_read_until(socket_, request_, "\r\n\r\n",
                           [self](const boost::system::error_code& ec, size_t n) {
                             HttpAnswer a;
                             if (ec == asio::error::not_found) {
                               a.code = 431;  // the buffer filled up before the blank line
                             } else if (ec) {
                               return self->Close();
                             } else {
                               std::string head(asio::buffers_begin(self->request_.data()),
                                                asio::buffers_begin(self->request_.data()) + n);
                               a = RouteMetricsRequest(head);
                             }
                             self->Answer(a);
                           });
  }

 private:
  void Answer(const HttpAnswer& a) {
    // HEAD renders the text too: its Content-Length is the one GET would send.
    std::string body = a.serve_metrics && core_->metrics ? core_->metrics() : "";
    out_ = FormatHttpResponse(a, body);
    auto self = shared_from_this();
    asio::async_write(socket_, asio::buffer(out_),
                      [self](const boost::system::error_code& ec, size_t) {
                        if (ec) return self->Close();
                        self->Linger();
                      });
  }

  // Stops sending and drops what the client still sends before closing, so a request left
  // partly unread (431) does not turn the close into a reset that loses the response.
  void Linger() {
    boost::system::error_code ignored;
    socket_.shutdown(Tcp::socket::shutdown_send, ignored);
    Drain(0);
  }

  void Drain(size_t drained) {
    auto self = shared_from_this();
    socket_.async_read_some(asio::buffer(drain_),
                            [self, drained](const boost::system::error_code& ec, size_t n) {
                              if (ec || drained + n > 4 * kMaxHttpHeadBytes) return self->Close();
                              self->Drain(drained + n);
                            });
  }

  void Close() {
    deadline_.cancel();
    boost::system::error_code ignored;
    socket_.shutdown(Tcp::socket::shutdown_both, ignored);
    socket_.close(ignored);
  }

  Tcp::socket socket_;
  ServerCore* const core_;
  ConnectionSlot slot_;
  asio::steady_timer deadline_;
  asio::streambuf request_;
  std::string out_;
  std::array<char, 1024> drain_{};
};

}  // namespace

void StartMetricsSession(Tcp::socket socket, ServerCore* core, ConnectionSlot slot) {
  std::make_shared<MetricsSession>(std::move(socket), core, std::move(slot))->Begin();
}

}  // namespace control_internal
}  // namespace tandem
