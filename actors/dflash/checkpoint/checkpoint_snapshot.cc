#include "actors/dflash/checkpoint/checkpoint_snapshot.h"

#include "kernels/core/pinned_allocator.h"
#include "runtime/core/clock.h"

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/core/cuda_check.h"
#include "kernels/core/stream.h"
#endif

namespace tandem::dflash {
namespace {

class CpuSnapshot final : public CheckpointSnapshot {
 public:
  Status Init(const models::DFlashParamLayout& layout) {
    ASSIGN_OR_RETURN(host_, models::DFlashHostState::Allocate(layout, alloc_));
    return Status::Ok();
  }
  Status Take(models::DFlashDrafter& drafter) override {
    const int64_t t0 = NowNanos();
    RETURN_IF_ERROR(models::CopyDFlashState(drafter, host_, drafter.stream()));
    seconds_ = (NowNanos() - t0) * 1e-9;
    return Status::Ok();
  }
  Status BeforeUpdate(kernels::Stream) override { return Status::Ok(); }
  Result<double> WaitCopied() override { return seconds_; }
  const models::DFlashHostState& host() const override { return host_; }

 private:
  kernels::PinnedAllocator alloc_;  // page-aligned host memory here; outlives host_
  models::DFlashHostState host_;
  double seconds_ = 0;
};

#ifdef TANDEM_HAVE_CUDA

class CudaSnapshot final : public CheckpointSnapshot {
 public:
  explicit CudaSnapshot(int device) : device_(device) {}
  ~CudaSnapshot() override {
    if (stream_.get() != nullptr) CUDA_LOG_IF_ERROR(cudaStreamSynchronize(stream_.get()));
  }

  Status Init(const models::DFlashParamLayout& layout) {
    kernels::DeviceGuard guard(device_);
    ASSIGN_OR_RETURN(stream_, kernels::CudaStream::Create(device_));
    ASSIGN_OR_RETURN(updated_, kernels::CudaEvent::Create(device_));
    ASSIGN_OR_RETURN(start_, kernels::CudaEvent::Create(device_, /*timing=*/true));
    ASSIGN_OR_RETURN(done_, kernels::CudaEvent::Create(device_, /*timing=*/true));
    ASSIGN_OR_RETURN(host_, models::DFlashHostState::Allocate(layout, alloc_));
    return Status::Ok();
  }

  Status Take(models::DFlashDrafter& drafter) override {
    kernels::DeviceGuard guard(device_);
    RETURN_IF_ERROR(updated_.Record(drafter.stream()));
    RETURN_IF_ERROR(stream_.Wait(updated_));
    RETURN_IF_ERROR(start_.Record(stream_.get()));
    RETURN_IF_ERROR(models::CopyDFlashState(drafter, host_, stream_.get()));
    RETURN_IF_ERROR(done_.Record(stream_.get()));
    update_must_wait_ = true;
    return Status::Ok();
  }

  Status BeforeUpdate(kernels::Stream compute) override {
    if (!update_must_wait_) return Status::Ok();
    CUDA_RETURN_IF_ERROR(cudaStreamWaitEvent(compute, done_.get(), 0));
    update_must_wait_ = false;
    return Status::Ok();
  }

  Result<double> WaitCopied() override {
    RETURN_IF_ERROR(done_.Synchronize());
    ASSIGN_OR_RETURN(float ms, done_.ElapsedMsSince(start_));
    return ms * 1e-3;
  }
  const models::DFlashHostState& host() const override { return host_; }

 private:
  int device_;
  kernels::CudaStream stream_;  // the snapshot's own copy stream
  kernels::CudaEvent updated_;  // compute stream: the step's optimizer update is done
  kernels::CudaEvent start_, done_;  // copy stream: the copies begin / are done
  bool update_must_wait_ = false;    // the next update waits for done_
  kernels::PinnedAllocator alloc_;   // outlives host_
  models::DFlashHostState host_;
};

#endif

}  // namespace

Result<std::unique_ptr<CheckpointSnapshot>> CheckpointSnapshot::Create(
    const models::DFlashParamLayout& layout, kernels::Device device) {
  if (device.is_cpu()) {
    auto s = std::make_unique<CpuSnapshot>();
    RETURN_IF_ERROR(s->Init(layout));
    return std::unique_ptr<CheckpointSnapshot>(std::move(s));
  }
#ifdef TANDEM_HAVE_CUDA
  auto s = std::make_unique<CudaSnapshot>(device.index);
  RETURN_IF_ERROR(s->Init(layout));
  return std::unique_ptr<CheckpointSnapshot>(std::move(s));
#else
  return InvalidArgumentError("a checkpoint snapshot on cuda:{}: this build has no CUDA",
                              device.index);
#endif
}

}  // namespace tandem::dflash
