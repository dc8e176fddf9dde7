// NcclComm over the NCCL C API; every ncclResult_t becomes a Status naming the call and
// NCCL's error string. Without NCCL (CPU builds) every entry point says so.
#include "kernels/comm/nccl.h"

#ifdef TANDEM_HAVE_NCCL
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <atomic>
#include <cstring>
#include <mutex>
#include <thread>

#include "kernels/core/cuda_check.h"
#endif

namespace tandem::kernels {

#ifdef TANDEM_HAVE_NCCL

#define NCCL_RETURN_IF_ERROR(expr)                                                       \
  do {                                                                                   \
    ncclResult_t _r = (expr);                                                            \
    if (_r != ncclSuccess)                                                               \
      return ::tandem::CudaError("{}:{}: {}: {} ({})", __FILE__, __LINE__, #expr,        \
                                 ncclGetErrorString(_r), ncclGetLastError(nullptr));     \
  } while (0)

struct NcclComm::Handle {
  ncclComm_t comm = nullptr;
  bool nonblocking = false;
  std::mutex abort_mu;          // Abort once, and not while the destructor destroys
  bool aborted = false;         // GUARDED_BY(abort_mu)
};

namespace {

Result<ncclDataType_t> NcclType(const char* op, const TensorView& t) {
  switch (t.dtype()) {
    case DType::kBF16: return ncclBfloat16;
    case DType::kF32: return ncclFloat32;
    case DType::kF16: return ncclFloat16;
    case DType::kI32: return ncclInt32;
    case DType::kI64: return ncclInt64;
    case DType::kU8: return ncclUint8;
    case DType::kF8E4M3:
    case DType::kF8E5M2: break;  // no reductions over FP8
  }
  return InvalidArgumentError("{}: unsupported dtype in {}", op, t.ToString());
}

Status CheckOnDevice(const char* op, const TensorView& t, int device) {
  RETURN_IF_ERROR(ExpectContiguous(op, "tensor", t));
  if (!t.device().is_cuda() || t.device().index != device)
    return InvalidArgumentError("{}: {} must be on cuda:{}, the communicator's device", op,
                                t.ToString(), device);
  return Status::Ok();
}

}  // namespace

NcclComm::NcclComm(std::unique_ptr<Handle> h, int rank, int size, int device)
    : handle_(std::move(h)), rank_(rank), size_(size), device_(device) {}

NcclComm::~NcclComm() {
  if (!handle_ || !handle_->comm) return;
  std::lock_guard lock(handle_->abort_mu);
  if (!handle_->aborted) ncclCommDestroy(handle_->comm);
}

namespace {

// A non-blocking communicator's pending work: polls its state until it leaves
// ncclInProgress, or `deadline` passes (false).
bool WaitReady(ncclComm_t comm, ncclResult_t* state, TimePoint deadline) {
  while (true) {
    if (ncclCommGetAsyncError(comm, state) != ncclSuccess) return true;
    if (*state != ncclInProgress) return true;
    if (SteadyClock::now() >= deadline) return false;
    std::this_thread::yield();
  }
}

}  // namespace

Result<std::unique_ptr<NcclComm>> NcclComm::CreateNonBlocking(const NcclUniqueId& id,
                                                              int nranks, int rank, int device,
                                                              Duration timeout) {
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return InvalidArgumentError("NcclComm::CreateNonBlocking: rank {} out of range for {} "
                                "ranks", rank, nranks);
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  ncclUniqueId raw;
  std::memcpy(&raw, id.data(), id.size());
  auto h = std::make_unique<Handle>();
  h->nonblocking = true;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t r = ncclCommInitRankConfig(&h->comm, nranks, raw, rank, &config);
  if (r != ncclSuccess && r != ncclInProgress) {
    if (h->comm != nullptr) ncclCommAbort(h->comm);
    return CudaError("ncclCommInitRankConfig (rank {} of {}, cuda:{}): {} ({})", rank, nranks,
                     device, ncclGetErrorString(r), ncclGetLastError(nullptr));
  }
  ncclResult_t state = ncclInProgress;
  const bool done = WaitReady(h->comm, &state, SteadyClock::now() + timeout);
  if (!done || state != ncclSuccess) {
    ncclCommAbort(h->comm);
    if (!done)
      return DeadlineExceededError("NCCL communicator rank {} of {} on cuda:{} was not set up "
                                   "within {:.1f} s (a peer missing?); aborted", rank, nranks,
                                   device, std::chrono::duration<double>(timeout).count());
    return CudaError("NCCL communicator rank {} of {} on cuda:{}: {} ({})", rank, nranks,
                     device, ncclGetErrorString(state), ncclGetLastError(h->comm));
  }
  return std::unique_ptr<NcclComm>(new NcclComm(std::move(h), rank, nranks, device));
}

Status NcclComm::AsyncError() const {
  std::lock_guard lock(handle_->abort_mu);
  if (handle_->aborted) return UnavailableError("NCCL communicator rank {}: aborted", rank_);
  ncclResult_t state = ncclSuccess;
  NCCL_RETURN_IF_ERROR(ncclCommGetAsyncError(handle_->comm, &state));
  if (state == ncclSuccess || state == ncclInProgress) return Status::Ok();
  return UnavailableError("NCCL communicator rank {} of {}: {} ({})", rank_, size_,
                          ncclGetErrorString(state), ncclGetLastError(handle_->comm));
}

void NcclComm::Abort() {
  std::lock_guard lock(handle_->abort_mu);
  if (handle_->aborted || handle_->comm == nullptr) return;
  handle_->aborted = true;
  ncclCommAbort(handle_->comm);
}

Result<NcclUniqueId> NcclComm::NewUniqueId() {
  ncclUniqueId raw;
  NCCL_RETURN_IF_ERROR(ncclGetUniqueId(&raw));
  static_assert(sizeof(raw) == sizeof(NcclUniqueId));
  NcclUniqueId id;
  std::memcpy(id.data(), &raw, id.size());
  return id;
}

Result<std::unique_ptr<NcclComm>> NcclComm::Create(const NcclUniqueId& id, int nranks, int rank,
                                                   int device) {
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return InvalidArgumentError("NcclComm::Create: rank {} out of range for {} ranks", rank,
                                nranks);
  CUDA_RETURN_IF_ERROR(cudaSetDevice(device));
  ncclUniqueId raw;
  std::memcpy(&raw, id.data(), id.size());
  auto h = std::make_unique<Handle>();
  NCCL_RETURN_IF_ERROR(ncclCommInitRank(&h->comm, nranks, raw, rank));
  return std::unique_ptr<NcclComm>(new NcclComm(std::move(h), rank, nranks, device));
}

Result<std::vector<std::unique_ptr<NcclComm>>> NcclComm::CreateLocal(
    const std::vector<int>& devices) {
  if (devices.empty()) return InvalidArgumentError("NcclComm::CreateLocal: no devices");
  std::vector<ncclComm_t> comms(devices.size());
  NCCL_RETURN_IF_ERROR(
      ncclCommInitAll(comms.data(), static_cast<int>(devices.size()), devices.data()));
  std::vector<std::unique_ptr<NcclComm>> out;
  for (size_t i = 0; i < devices.size(); ++i) {
    auto h = std::make_unique<Handle>();
    h->comm = comms[i];
    out.push_back(std::unique_ptr<NcclComm>(
        new NcclComm(std::move(h), static_cast<int>(i), static_cast<int>(devices.size()),
                     devices[i])));
  }
  return out;
}

Status NcclComm::AllReduce(const TensorView& send, const TensorView& recv, ReduceOp op,
                           Stream s) {
  constexpr const char* kOp = "NcclComm::AllReduce";
  RETURN_IF_ERROR(CheckOnDevice(kOp, send, device_));
  RETURN_IF_ERROR(CheckOnDevice(kOp, recv, device_));
  RETURN_IF_ERROR(ExpectDType(kOp, "recv", recv, send.dtype()));
  RETURN_IF_ERROR(ExpectShape(kOp, "recv", recv, send.shape()));
  if (send.dtype() != DType::kBF16 && send.dtype() != DType::kF32)
    return InvalidArgumentError("{}: expected bf16 or f32, got {}", kOp, send.ToString());
  ASSIGN_OR_RETURN(ncclDataType_t type, NcclType(kOp, send));
  if (!handle_->nonblocking) {
    NCCL_RETURN_IF_ERROR(ncclAllReduce(send.data(), recv.data(),
                                       static_cast<size_t>(send.numel()), type,
                                       op == ReduceOp::kSum ? ncclSum : ncclAvg, handle_->comm,
                                       s));
    return Status::Ok();
  }
  // Non-blocking: enqueueing may itself stay in progress; wait for that (host-side only, not
  // for the collective), under the abort lock so a watchdog's Abort() never frees the
  // communicator under this thread, and releasing it between polls so Abort() can run.
  ncclResult_t state = ncclInProgress;
  {
    std::lock_guard lock(handle_->abort_mu);
    if (handle_->aborted) return UnavailableError("{}: the communicator was aborted", kOp);
    state = ncclAllReduce(send.data(), recv.data(), static_cast<size_t>(send.numel()), type,
                          op == ReduceOp::kSum ? ncclSum : ncclAvg, handle_->comm, s);
  }
  while (state == ncclInProgress) {
    std::this_thread::yield();
    std::lock_guard lock(handle_->abort_mu);
    if (handle_->aborted) return UnavailableError("{}: the communicator was aborted", kOp);
    if (ncclCommGetAsyncError(handle_->comm, &state) != ncclSuccess) break;
  }
  if (state != ncclSuccess)
    return CudaError("{} (rank {} of {}): {} ({})", kOp, rank_, size_, ncclGetErrorString(state),
                     ncclGetLastError(handle_->comm));
  return Status::Ok();
}

Status NcclComm::Send(const TensorView& t, int peer, Stream s) {
  RETURN_IF_ERROR(CheckOnDevice("NcclComm::Send", t, device_));
  ASSIGN_OR_RETURN(ncclDataType_t type, NcclType("NcclComm::Send", t));
  NCCL_RETURN_IF_ERROR(
      ncclSend(t.data(), static_cast<size_t>(t.numel()), type, peer, handle_->comm, s));
  return Status::Ok();
}

Status NcclComm::Recv(const TensorView& t, int peer, Stream s) {
  RETURN_IF_ERROR(CheckOnDevice("NcclComm::Recv", t, device_));
  ASSIGN_OR_RETURN(ncclDataType_t type, NcclType("NcclComm::Recv", t));
  NCCL_RETURN_IF_ERROR(
      ncclRecv(t.data(), static_cast<size_t>(t.numel()), type, peer, handle_->comm, s));
  return Status::Ok();
}

NcclGroup::NcclGroup() : open_(ncclGroupStart() == ncclSuccess) {}
NcclGroup::~NcclGroup() {
  if (open_) ncclGroupEnd();
}
Status NcclGroup::End() {
  if (!open_) return CudaError("NcclGroup: ncclGroupStart had failed");
  open_ = false;
  NCCL_RETURN_IF_ERROR(ncclGroupEnd());
  return Status::Ok();
}

#else  // !TANDEM_HAVE_NCCL

struct NcclComm::Handle {};

namespace {
Status NoNccl(const char* what) {
  return UnavailableError("{}: tandem was built without CUDA/NCCL (configure with "
                          "-DTANDEM_CUDA=ON where nvcc and libnccl are installed)",
                          what);
}
}  // namespace

NcclComm::NcclComm(std::unique_ptr<Handle> h, int rank, int size, int device)
    : handle_(std::move(h)), rank_(rank), size_(size), device_(device) {}
NcclComm::~NcclComm() = default;
Result<NcclUniqueId> NcclComm::NewUniqueId() { return NoNccl("NcclComm::NewUniqueId"); }
Result<std::unique_ptr<NcclComm>> NcclComm::Create(const NcclUniqueId&, int, int, int) {
  return NoNccl("NcclComm::Create");
}
Result<std::unique_ptr<NcclComm>> NcclComm::CreateNonBlocking(const NcclUniqueId&, int, int,
                                                              int, Duration) {
  return NoNccl("NcclComm::CreateNonBlocking");
}
Result<std::vector<std::unique_ptr<NcclComm>>> NcclComm::CreateLocal(const std::vector<int>&) {
  return NoNccl("NcclComm::CreateLocal");
}
Status NcclComm::AsyncError() const { return NoNccl("NcclComm::AsyncError"); }
void NcclComm::Abort() {}
Status NcclComm::AllReduce(const TensorView&, const TensorView&, ReduceOp, Stream) {
  return NoNccl("NcclComm::AllReduce");
}
Status NcclComm::Send(const TensorView&, int, Stream) { return NoNccl("NcclComm::Send"); }
Status NcclComm::Recv(const TensorView&, int, Stream) { return NoNccl("NcclComm::Recv"); }
NcclGroup::NcclGroup() = default;
NcclGroup::~NcclGroup() = default;
Status NcclGroup::End() { return NoNccl("NcclGroup::End"); }

#endif  // TANDEM_HAVE_NCCL

}  // namespace tandem::kernels
