#include "runtime/control/client.h"

#include <array>
#include <optional>
#include <vector>

#include <fmt/format.h>

#include "runtime/control/asio.h"

namespace tandem {

namespace asio = boost::asio;

namespace {

// The whole exchange as a chain of async operations on a private io_context, so one
// run_for() bounds it with a deadline. Frames are sent one at a time, each after the reply
// to the one before; an error reply ends the exchange early. The result is the last reply.
template <typename Socket>
class Exchange {
 public:
  Exchange(asio::io_context& io, std::vector<std::string> frames)
      : socket_(io), frames_(std::move(frames)) {}

  template <typename EndpointT>
  void Begin(const EndpointT& ep) {
    socket_.async_connect(ep, [this](const boost::system::error_code& ec) {
      if (ec) return Fail(ec, "cannot connect");
      Send();
    });
  }

  std::optional<Result<ControlResponse>> result;

 private:
  void Send() {
    asio::async_write(socket_, asio::buffer(frames_[next_]),
                      [this](const boost::system::error_code& ec, size_t) {
                        if (ec) return Fail(ec, "cannot send the request");
                        ++next_;
                        ReadHeader();
                      });
  }

  void ReadHeader() {
    asio::async_read(socket_, asio::buffer(header_), [this](const boost::system::error_code& ec, size_t) {
      if (ec) return Fail(ec, "no reply");
      Result<uint32_t> size = ParseFrameHeader(header_);
      if (!size.ok()) {
        result = size.status().WithContext("bad reply");
        return;
      }
      payload_.assign(*size, '\0');
      asio::async_read(socket_, asio::buffer(payload_), [this](const boost::system::error_code& ec, size_t) {
        if (ec) return Fail(ec, "truncated reply");
        Result<ControlResponse> reply = DecodeResponse(payload_);
        if (next_ < frames_.size() && reply.ok() && reply->kind != ControlResponse::Kind::kError)
          return Send();
        result = std::move(reply);
      });
    });
  }

  void Fail(const boost::system::error_code& ec, const char* what) {
    result = UnavailableError("{}: {}", what, ec.message());
  }

  Socket socket_;
  std::vector<std::string> frames_;
  size_t next_ = 0;
  std::array<uint8_t, kFrameHeaderBytes> header_{};
  std::string payload_;
};

template <typename Socket, typename EndpointT>
Result<ControlResponse> Run(const EndpointT& ep, std::vector<std::string> frames,
                            Duration timeout, const std::string& where) {
  asio::io_context io;
  Exchange<Socket> ex(io, std::move(frames));
  ex.Begin(ep);
  io.run_for(std::chrono::duration_cast<std::chrono::nanoseconds>(timeout));
  if (!ex.result)
    return DeadlineExceededError("{}: no reply within {:.1f}s", where,
                                 std::chrono::duration<double>(timeout).count());
  if (!ex.result->ok()) return ex.result->status().WithContext(where);
  return std::move(*ex.result);
}

}  // namespace

std::string Endpoint::ToString() const {
  return tcp_port >= 0 ? fmt::format("{}:{}", host, tcp_port) : unix_path;
}

Result<ControlResponse> Call(const Endpoint& endpoint, ControlRequest req, Duration timeout) {
  req.token = endpoint.token;
  std::vector<std::string> frames;
  frames.push_back(EncodeRequest(req));
  if (endpoint.tcp_port >= 0) {
    // The server buffers nothing large before the token is checked: authenticate with a
    // small ping first when the request is larger than that.
    if (frames.back().size() - kFrameHeaderBytes > kMaxUnauthenticatedFrameBytes) {
      ControlRequest ping;
      ping.token = endpoint.token;
      frames.insert(frames.begin(), EncodeRequest(ping));
    }
    boost::system::error_code ec;
    auto addr = asio::ip::make_address(endpoint.host, ec);
    if (ec) return InvalidArgumentError("bad address '{}': {}", endpoint.host, ec.message());
    asio::ip::tcp::endpoint ep(addr, static_cast<unsigned short>(endpoint.tcp_port));
    return Run<asio::ip::tcp::socket>(ep, std::move(frames), timeout, endpoint.ToString());
  }
  asio::local::stream_protocol::endpoint ep(endpoint.unix_path);
  return Run<asio::local::stream_protocol::socket>(ep, std::move(frames), timeout,
                                                  endpoint.ToString());
}

}  // namespace tandem
