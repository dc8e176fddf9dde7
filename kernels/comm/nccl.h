// NCCL communicators and collectives for data-parallel drafter training.
//
// Set-up inside one process: CreateLocal({0, 1, ...}) makes one rank per device at once; or
// NewUniqueId() once, share the bytes in memory, and call Create(id, n, rank, device) on n
// threads. Across processes: the caller ships the 128 unique-id bytes (file, socket, the
// cluster head's key-value service) and every process calls CreateNonBlocking, so that no
// rank hangs when a peer dies: a watchdog polls AsyncError() and calls Abort(), which ends
// every pending operation. Collectives are enqueued on the caller's stream; when one
// thread drives several local ranks, wrap the per-rank calls in NcclGroup.
//
//   AllReduce: send, recv same shape/dtype (bf16 or f32), may alias (in place).
//   Send/Recv: contiguous views; the peer posts the matching call.
//
// Thread-safety: a NcclComm is used by one thread at a time (NCCL's rule); distinct
// communicators may be used from distinct threads.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/core/dtype.h"
#include "kernels/core/tensor.h"
#include "runtime/core/clock.h"
#include "runtime/core/status.h"

namespace tandem::kernels {

using NcclUniqueId = std::array<uint8_t, 128>;

enum class ReduceOp : uint8_t { kSum, kAvg };

class NcclComm {
 public:
  // A fresh id; one rank makes it and every rank passes the same bytes to Create.
  static Result<NcclUniqueId> NewUniqueId();
  // Joins rank `rank` of `nranks` on CUDA `device`; blocks until all ranks have joined.
  static Result<std::unique_ptr<NcclComm>> Create(const NcclUniqueId& id, int nranks, int rank,
                                                  int device);
  // Across processes: a non-blocking communicator (ncclCommInitRankConfig, blocking = 0).
  // Waits for its set-up until `timeout` (then aborts it: DeadlineExceeded) or an error.
  // Collectives on it return once enqueued.
  static Result<std::unique_ptr<NcclComm>> CreateNonBlocking(const NcclUniqueId& id, int nranks,
                                                             int rank, int device,
                                                             Duration timeout);
  // One communicator per device in this process; rank i is devices[i].
  static Result<std::vector<std::unique_ptr<NcclComm>>> CreateLocal(
      const std::vector<int>& devices);

  ~NcclComm();
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  int device() const { return device_; }

  Status AllReduce(const TensorView& send, const TensorView& recv, ReduceOp op, Stream s);
  Status Send(const TensorView& t, int peer, Stream s);
  Status Recv(const TensorView& t, int peer, Stream s);

  // ncclCommGetAsyncError: Ok while healthy (or still working), else the error (a peer
  // died, the network failed). Safe from another thread (a watchdog).
  Status AsyncError() const;
  // ncclCommAbort: ends every pending operation; the communicator cannot be used again.
  // Safe from another thread; idempotent.
  void Abort();

  struct Handle;

 private:
  NcclComm(std::unique_ptr<Handle> h, int rank, int size, int device);
  std::unique_ptr<Handle> handle_;
  int rank_ = 0, size_ = 1, device_ = 0;
};

// ncclGroupStart on construction, ncclGroupEnd in End() (or the destructor, ignoring errors).
class NcclGroup {
 public:
  NcclGroup();
  ~NcclGroup();
  NcclGroup(const NcclGroup&) = delete;
  NcclGroup& operator=(const NcclGroup&) = delete;
  Status End();

 private:
  bool open_ = false;
};

}  // namespace tandem::kernels
