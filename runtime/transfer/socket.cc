// TCP sockets for object links: see socket.h.
#include "runtime/transfer/socket.h"

#include <fmt/format.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <chrono>
#include <cstring>
#include <vector>

namespace tandem::transfer {
namespace {

std::string Errno() { return std::strerror(errno); }

void SetNoDelay(int fd) {
  int one = 1;
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int PollMillis(Duration timeout) {
  if (timeout == Duration::max()) return -1;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(timeout).count();
  return static_cast<int>(std::clamp<int64_t>(ms, 0, 1 << 30));
}

}  // namespace

void Socket::Close() {
  if (fd_ >= 0) ::close(std::exchange(fd_, -1));
}

void Socket::Shutdown() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_RDWR);
}

void Socket::ShutdownWrite() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

Status Socket::SendAll(struct iovec* iov, int iovcnt) {
  while (iovcnt > 0) {
    struct msghdr msg {};
    msg.msg_iov = iov;
    msg.msg_iovlen = static_cast<size_t>(std::min(iovcnt, IOV_MAX));
    const ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return UnavailableError("send failed: {}", Errno());
    }
    size_t left = static_cast<size_t>(n);
    while (iovcnt > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --iovcnt;
    }
    if (iovcnt > 0) {
      iov->iov_base = static_cast<uint8_t*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
  return Status::Ok();
}

Status Socket::SendAll(const void* data, size_t n) {
  struct iovec v {
    const_cast<void*>(data), n
  };
  return SendAll(&v, 1);
}

Status Socket::RecvAll(void* data, size_t n, bool* eof) {
  if (eof != nullptr) *eof = false;
  size_t got = 0;
  while (got < n) {
    const ssize_t r = ::recv(fd_, static_cast<uint8_t*>(data) + got, n - got, 0);
    if (r == 0) {
      if (got == 0 && eof != nullptr) *eof = true;
      return UnavailableError("the connection closed{}",
                              got == 0 ? "" : fmt::format(" {} bytes into a {}-byte read", got, n));
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      return UnavailableError("receive failed: {}", Errno());
    }
    got += static_cast<size_t>(r);
  }
  return Status::Ok();
}

Result<Socket> Listen(const std::string& host, int port) {
  Socket s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.valid()) return UnavailableError("socket failed: {}", Errno());
  int one = 1;
  (void)::setsockopt(s.fd(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const std::string h = host.empty() ? "0.0.0.0" : host;
  if (::inet_pton(AF_INET, h.c_str(), &addr.sin_addr) != 1)
    return InvalidArgumentError("listen address '{}' is not an IPv4 address", h);
  if (::bind(s.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0)
    return UnavailableError("cannot listen on {}:{}: {}", h, port, Errno());
  if (::listen(s.fd(), 64) != 0) return UnavailableError("listen on {}:{}: {}", h, port, Errno());
  return s;
}

Result<int> LocalPort(const Socket& s) {
  sockaddr_in addr{};
  socklen_t len = sizeof(addr);
  if (::getsockname(s.fd(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return UnavailableError("getsockname: {}", Errno());
  return static_cast<int>(ntohs(addr.sin_port));
}

Result<Socket> Accept(Socket& listener, Duration timeout) {
  pollfd p{listener.fd(), POLLIN, 0};
  const int r = ::poll(&p, 1, PollMillis(timeout));
  if (r == 0) return DeadlineExceededError("no connection yet");
  if (r < 0 && errno != EINTR) return UnavailableError("poll: {}", Errno());
  if (r < 0) return DeadlineExceededError("interrupted");
  if ((p.revents & (POLLERR | POLLHUP | POLLNVAL)) != 0)
    return UnavailableError("the listener was shut down");
  const int fd = ::accept4(listener.fd(), nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) {
    if (errno == EINVAL) return UnavailableError("the listener was shut down");
    return DeadlineExceededError("accept: {}", Errno());
  }
  SetNoDelay(fd);
  return Socket(fd);
}

Result<Socket> Connect(const std::string& host, int port, Duration timeout) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string service = std::to_string(port);
  if (int e = ::getaddrinfo(host.c_str(), service.c_str(), &hints, &res); e != 0)
    return UnavailableError("cannot resolve {}: {}", host, ::gai_strerror(e));
  std::string last = "no address";
  for (addrinfo* a = res; a != nullptr; a = a->ai_next) {
    Socket s(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
    if (!s.valid()) continue;
    int r = ::connect(s.fd(), a->ai_addr, a->ai_addrlen);
    if (r != 0 && errno == EINPROGRESS) {
      pollfd p{s.fd(), POLLOUT, 0};
      r = ::poll(&p, 1, PollMillis(timeout));
      int err = 0;
      socklen_t len = sizeof(err);
      if (r == 1) (void)::getsockopt(s.fd(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (r == 1 && err == 0) {
        r = 0;
      } else {
        errno = r == 0 ? ETIMEDOUT : err;
        r = -1;
      }
    }
    if (r == 0) {
      const int flags = ::fcntl(s.fd(), F_GETFL);
      (void)::fcntl(s.fd(), F_SETFL, flags & ~O_NONBLOCK);
      SetNoDelay(s.fd());
      ::freeaddrinfo(res);
      return s;
    }
    last = Errno();
  }
  ::freeaddrinfo(res);
  return UnavailableError("cannot connect to {}:{}: {}", host, port, last);
}

}  // namespace tandem::transfer
