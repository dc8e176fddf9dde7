// TCP sockets for object links: an owned descriptor, listen / accept / connect, and whole
// sends and receives. Blocking calls; another thread ends a blocked call with Shutdown().
//
// Thread-safety: a Socket may be read by one thread and written by another at once;
// Shutdown() may be called from any thread. Two concurrent writers need their own lock.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>

#include "runtime/core/clock.h"
#include "runtime/core/status.h"

namespace tandem::transfer {

class Socket {
 public:
  Socket() = default;
  explicit Socket(int fd) : fd_(fd) {}
  Socket(Socket&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  Socket& operator=(Socket&& o) noexcept {
    if (this != &o) {
      Close();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  ~Socket() { Close(); }

  int fd() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Close();
  // Wakes a thread blocked on this socket (its call fails); the descriptor stays open.
  void Shutdown();
  // Half-close: the peer reads end of stream after what was sent.
  void ShutdownWrite();

  // Sends every byte of `iov` (MSG_NOSIGNAL). Unavailable naming errno on failure.
  Status SendAll(struct iovec* iov, int iovcnt);
  Status SendAll(const void* data, size_t n);
  // Receives exactly `n` bytes. Unavailable on error or end of stream; `eof` (optional) is
  // set when the stream ended cleanly before the first byte.
  Status RecvAll(void* data, size_t n, bool* eof = nullptr);

 private:
  int fd_ = -1;
};

// Listens on host:port (port 0: any free port; host "" or "0.0.0.0": every interface).
Result<Socket> Listen(const std::string& host, int port);
// The port a listening socket is bound to.
Result<int> LocalPort(const Socket& s);
// Waits up to `timeout` for a connection (DeadlineExceeded), or until the listener is shut
// down (Unavailable).
Result<Socket> Accept(Socket& listener, Duration timeout);
// Connects to host:port within `timeout`, with TCP_NODELAY set.
Result<Socket> Connect(const std::string& host, int port, Duration timeout);

}  // namespace tandem::transfer
