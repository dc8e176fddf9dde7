// Test helpers for the control plane: a private temporary directory, raw client sockets
// (Unix and TCP loopback) that send arbitrary bytes, and polling waits with generous
// deadlines (never fixed sleeps), so a loaded machine only makes tests slower.
// Thread-safety: each helper is used by one test thread.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include "runtime/control/messages.h"

namespace tandem::testing {

inline constexpr std::chrono::seconds kDeadline{60};

// Unique per instance (mkdtemp), so runs at once never share it. Under /tmp, not $TMPDIR: a
// build's deep test-tmp path would push the socket paths inside past sun_path's 108 bytes.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/tandem-ctl-XXXXXX";
    path_ = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// A connected raw socket, closed on destruction. fd() < 0 if the connect failed.
class RawClient {
 public:
  static RawClient Unix(const std::string& path) {
    RawClient c(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    if (c.fd_ >= 0 && ::connect(c.fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
      c.Close();
    return c;
  }
  static RawClient Tcp(int port) {
    RawClient c(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (c.fd_ >= 0 && ::connect(c.fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
      c.Close();
    return c;
  }
  RawClient(RawClient&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  RawClient& operator=(RawClient&& o) noexcept {
    std::swap(fd_, o.fd_);
    return *this;
  }
  ~RawClient() { Close(); }

  int fd() const { return fd_; }
  bool Send(const std::string& bytes) {
    size_t done = 0;
    while (done < bytes.size()) {
      ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (n <= 0) return false;
      done += static_cast<size_t>(n);
    }
    return true;
  }
  // Reads exactly n bytes; nullopt on EOF, error or deadline.
  std::optional<std::string> Read(size_t n, std::chrono::seconds deadline = kDeadline) {
    std::string out;
    const auto end = std::chrono::steady_clock::now() + deadline;
    while (out.size() < n) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          end - std::chrono::steady_clock::now());
      if (left.count() <= 0) return std::nullopt;
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) return std::nullopt;
      char buf[65536];
      ssize_t got = ::recv(fd_, buf, std::min(sizeof(buf), n - out.size()), 0);
      if (got <= 0) return std::nullopt;
      out.append(buf, static_cast<size_t>(got));
    }
    return out;
  }
  // One reply frame, decoded; nullopt if none came.
  std::optional<ControlResponse> ReadReply(std::chrono::seconds deadline = kDeadline) {
    auto header = Read(kFrameHeaderBytes, deadline);
    if (!header) return std::nullopt;
    std::array<uint8_t, kFrameHeaderBytes> h{};
    std::memcpy(h.data(), header->data(), h.size());
    auto size = ParseFrameHeader(h);
    if (!size.ok()) return std::nullopt;
    auto payload = Read(*size, deadline);
    if (!payload) return std::nullopt;
    auto resp = DecodeResponse(*payload);
    if (!resp.ok()) return std::nullopt;
    return *resp;
  }
  // True once the peer has closed the connection (EOF or reset) within the deadline.
  bool ClosedByPeer(std::chrono::seconds deadline = kDeadline) {
    const auto end = std::chrono::steady_clock::now() + deadline;
    while (std::chrono::steady_clock::now() < end) {
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, 100) > 0) {
        char buf[4096];
        if (::recv(fd_, buf, sizeof(buf), 0) <= 0) return true;
      }
    }
    return false;
  }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  explicit RawClient(int fd) : fd_(fd) {}
  int fd_;
};

// A frame header announcing `size` payload bytes.
inline std::string FrameHeader(uint32_t size) {
  std::string h = "TNDM";
  for (int i = 0; i < 4; ++i) h += static_cast<char>((size >> (8 * i)) & 0xff);
  return h;
}

// Polls `pred` until it holds or the deadline passes; returns its last value.
template <typename Pred>
bool WaitFor(Pred pred, std::chrono::seconds deadline = kDeadline) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

}  // namespace tandem::testing
