// The metrics endpoint: one HTTP/1.0 exchange per connection, routed by RouteMetricsRequest.
#include "runtime/control/metrics_http.h"

#include <array>

#include <fmt/format.h>

#include "runtime/control/server_core.h"

namespace tandem {

HttpAnswer RouteMetricsRequest(std::string_view head) {
  HttpAnswer a;
  const size_t eol = head.find("\r\n");
  std::string_view line = head.substr(0, eol);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == 0 || sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos ||
      line.substr(sp2 + 1).rfind("HTTP/1.", 0) != 0) {
    a.code = 400;
    return a;
  }
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (method != "GET" && method != "HEAD") {
    a.code = 405;
    return a;
  }
  std::string_view path = target.substr(0, target.find('?'));
  if (path != "/metrics") {
    a.code = 404;
    return a;
  }
  a.serve_metrics = true;
  a.head_only = method == "HEAD";
  return a;
}

std::string FormatHttpResponse(const HttpAnswer& answer, const std::string& body) {
  const char* reason = "OK";
  std::string text;
  std::string extra;
  switch (answer.code) {
    case 200: text = body; break;
    case 400: reason = "Bad Request"; text = "bad request: expected GET /metrics HTTP/1.x\n"; break;
    case 404: reason = "Not Found"; text = "not found: try GET /metrics\n"; break;
    case 405:
      reason = "Method Not Allowed";
      text = "method not allowed: use GET or HEAD\n";
      extra = "Allow: GET, HEAD\r\n";
      break;
    case 431:
      reason = "Request Header Fields Too Large";
      text = fmt::format("request headers over {} bytes\n", kMaxHttpHeadBytes);
      break;
    case 503: reason = "Service Unavailable"; text = "too many connections\n"; break;
    default: reason = "Error"; break;
  }
  std::string out = fmt::format(
      "HTTP/1.0 {} {}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n{}"
      "Connection: close\r\n\r\n",
      answer.code, reason, text.size(), extra);
  if (!answer.head_only) out += text;
  return out;
}

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
