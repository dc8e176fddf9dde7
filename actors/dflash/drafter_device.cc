#include "actors/dflash/drafter_device.h"

#include <cmath>
#include <cstring>
#include <deque>
#include <optional>

#include "kernels/optim/adamw_types.h"

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/core/cuda_check.h"
#include "kernels/core/memory.h"
#include "kernels/core/pinned_allocator.h"
#include "kernels/core/stream.h"
#include "runtime/profile/gpu_stage_timers.h"
#include "runtime/store/cuda_copy_engine.h"
#endif

namespace tandem::dflash {
namespace {

bool Finite(float loss, const float* gs) {
  return std::isfinite(loss) && gs[kernels::kGradStatsNonFinite] == 0.f;
}

class CpuDrafterDevice final : public DrafterDevice {
 public:
  explicit CpuDrafterDevice(JobEnv* env) : h2d_(env->profile->Stage("drafter.h2d")) {}
  kernels::Stream stream() const override { return nullptr; }
  Result<std::vector<kernels::TensorView>> Upload(const HiddenBatch& hb) override {
    ScopedTimer timer(h2d_);  // views of the host objects: nothing to copy
    std::vector<kernels::TensorView> ctx;
    for (const ObjectRef& r : hb.layers)
      ctx.emplace_back(const_cast<uint8_t*>(r.data()), kernels::DType::kBF16,
                       kernels::Shape({hb.tokens.tokens(), hb.hidden_size}));
    return ctx;
  }
  Status AfterStep(int64_t step, models::DFlashDrafter& d) override {
    flags_.push_back({step, Finite(*d.loss().data_as<float>(), d.grad_stats().data_as<float>())});
    return Status::Ok();
  }
  Result<std::vector<StepFlags>> Resolved(bool) override { return std::exchange(flags_, {}); }
  Result<StepMetrics> ReadMetrics(models::DFlashDrafter& d) override {
    StepMetrics m;
    m.loss = *d.loss().data_as<float>();
    std::memcpy(m.grad_stats, d.grad_stats().data_as<float>(), sizeof(m.grad_stats));
    const uint8_t* c = d.correct().data_as<uint8_t>();
    m.correct.assign(c, c + d.correct().numel());
    if (!d.selector_loss().empty()) {
      m.has_selector = true;
      m.selector_loss = *d.selector_loss().data_as<float>();
      std::memcpy(m.selector_stats, d.selector_stats().data(), sizeof(m.selector_stats));
      m.loss_rows = d.loss_rows();
    }
    return m;
  }
  Status Synchronize() override { return Status::Ok(); }

 private:
  StageHandle h2d_;
  std::vector<StepFlags> flags_;
};

#ifdef TANDEM_HAVE_CUDA

class CudaDrafterDevice final : public DrafterDevice {
 public:
  static constexpr int kRing = 16;  // steps whose flags may be in flight
  static constexpr int kSlotFloats = 5;  // grad stats [4], loss

  CudaDrafterDevice(kernels::Allocator* alloc, JobEnv* env)
      : device_(alloc->device().index), alloc_(alloc), env_(env),
        h2d_(env->profile->Stage("drafter.h2d")),
        gpu_step_(env->profile->Stage("drafter.gpu.step")) {}
  ~CudaDrafterDevice() override {
    CUDA_LOG_IF_ERROR(cudaSetDevice(device_));
    if (compute_.get() != nullptr) CUDA_LOG_IF_ERROR(cudaStreamSynchronize(compute_.get()));
    if (copy_.get() != nullptr) CUDA_LOG_IF_ERROR(cudaStreamSynchronize(copy_.get()));
  }

  Status Init(int64_t layers, int64_t max_tokens, int64_t hidden) {
    CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    ASSIGN_OR_RETURN(compute_, kernels::CudaStream::Create(device_));
    ASSIGN_OR_RETURN(copy_, kernels::CudaStream::Create(device_));
    engine_ = std::make_unique<CudaCopyEngine>(copy_.get());
    ASSIGN_OR_RETURN(timers_, GpuStageTimers::Create(env_->profile, 64));
    kernels::Allocator* pool = alloc_;
    for (Set& s : sets_) {
      for (int64_t i = 0; i < layers; ++i) {
        // bf16 [max_tokens, H]: written on the copy stream, read on the compute stream.
        ASSIGN_OR_RETURN(kernels::Tensor t, kernels::Tensor::Empty(
                                                *pool, kernels::DType::kBF16,
                                                {max_tokens, hidden}, compute_.get()));
        t.RecordStream(copy_.get());
        s.layers.push_back(std::move(t));
      }
      ASSIGN_OR_RETURN(s.ready, kernels::CudaEvent::Create(device_));
      ASSIGN_OR_RETURN(s.consumed, kernels::CudaEvent::Create(device_));
    }
    ASSIGN_OR_RETURN(ring_storage_, kernels::Tensor::Empty(pinned_, kernels::DType::kF32,
                                                           {kRing * kSlotFloats}));
    ring_ = static_cast<float*>(ring_storage_.data());
    for (int i = 0; i < kRing; ++i) {
      ASSIGN_OR_RETURN(kernels::CudaEvent e, kernels::CudaEvent::Create(device_));
      ring_events_.push_back(std::move(e));
    }
    return Status::Ok();
  }

  kernels::Stream stream() const override { return compute_.get(); }

  Result<std::vector<kernels::TensorView>> Upload(const HiddenBatch& hb) override {
    CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    Set& s = sets_[next_set_];
    next_set_ = (next_set_ + 1) % 2;
    const int64_t t = hb.tokens.tokens(), h = hb.hidden_size;
    const uint64_t bytes = static_cast<uint64_t>(t * h) * sizeof(kernels::bf16);
    if (hb.layers.size() != s.layers.size() || t > s.layers[0].shape()[0] ||
        h != s.layers[0].shape()[1])
      return InvalidArgumentError("batch of {} layers [{}, {}] does not fit the drafter's "
                                  "context buffers", hb.layers.size(), t, h);
    if (s.used) RETURN_IF_ERROR(copy_.Wait(s.consumed));  // the step that read this set
    std::vector<kernels::TensorView> ctx;
    {
      GpuScope scope = timers_->Scope(h2d_, copy_.get());
      for (size_t i = 0; i < hb.layers.size(); ++i) {
        // The fence's in-flight reference keeps the object alive until the copy is done.
        ASSIGN_OR_RETURN(auto fence, env_->store->CopyOut(hb.layers[i], 0,
                                                          s.layers[i].data(), bytes, *engine_));
        (void)fence;
        ctx.emplace_back(s.layers[i].data(), kernels::DType::kBF16, kernels::Shape({t, h}),
                         kernels::Device::Cuda(device_));
      }
    }
    RETURN_IF_ERROR(s.ready.Record(copy_.get()));
    RETURN_IF_ERROR(compute_.Wait(s.ready));
    current_ = &s;
    return ctx;
  }

  void BeginStep() override { step_scope_.emplace(timers_->Scope(gpu_step_, compute_.get())); }
  void EndStep() override { step_scope_.reset(); }

  Status AfterStep(int64_t step, models::DFlashDrafter& d) override {
    if (current_ != nullptr) {
      RETURN_IF_ERROR(current_->consumed.Record(compute_.get()));
      current_->used = true;
    }
    if (pending_.size() == kRing) RETURN_IF_ERROR(ResolveOldest(/*wait=*/true));
    const int slot = static_cast<int>(step % kRing);
    float* dst = ring_ + slot * kSlotFloats;
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst, d.grad_stats().data(), 4 * sizeof(float),
                                         cudaMemcpyDeviceToHost, compute_.get()));
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(dst + 4, d.loss().data(), sizeof(float),
                                         cudaMemcpyDeviceToHost, compute_.get()));
    RETURN_IF_ERROR(ring_events_[slot].Record(compute_.get()));
    pending_.push_back(step);
    timers_->Poll();
    return Status::Ok();
  }

  Result<std::vector<StepFlags>> Resolved(bool wait) override {
    while (!pending_.empty()) {
      ASSIGN_OR_RETURN(bool got, ResolveOldestOrNot(wait));
      if (!got) break;
    }
    return std::exchange(resolved_, {});
  }

  Result<StepMetrics> ReadMetrics(models::DFlashDrafter& d) override {
    StepMetrics m;
    m.correct.resize(d.correct().numel());
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(m.grad_stats, d.grad_stats().data(),
                                         sizeof(m.grad_stats), cudaMemcpyDeviceToHost,
                                         compute_.get()));
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&m.loss, d.loss().data(), sizeof(float),
                                         cudaMemcpyDeviceToHost, compute_.get()));
    CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(m.correct.data(), d.correct().data(),
                                         m.correct.size(), cudaMemcpyDeviceToHost,
                                         compute_.get()));
    if (!d.selector_loss().empty()) {
      m.has_selector = true;
      m.loss_rows = d.loss_rows();
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(&m.selector_loss, d.selector_loss().data(),
                                           sizeof(float), cudaMemcpyDeviceToHost,
                                           compute_.get()));
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(m.selector_stats, d.selector_stats().data(),
                                           sizeof(m.selector_stats), cudaMemcpyDeviceToHost,
                                           compute_.get()));
    }
    RETURN_IF_ERROR(compute_.Synchronize());
    return m;
  }

  Status Synchronize() override {
    RETURN_IF_ERROR(compute_.Synchronize());
    return copy_.Synchronize();
  }

 private:
  struct Set {
    std::vector<kernels::Tensor> layers;  // k x bf16 [max_tokens, H]
    kernels::CudaEvent ready;             // copy stream: this batch's H2D done
    kernels::CudaEvent consumed;          // compute stream: the step that read it
    bool used = false;
  };

  Status ResolveOldest(bool wait) { return ResolveOldestOrNot(wait).status(); }

  Result<bool> ResolveOldestOrNot(bool wait) {
    const int64_t step = pending_.front();
    const int slot = static_cast<int>(step % kRing);
    if (wait) {
      RETURN_IF_ERROR(ring_events_[slot].Synchronize());
    } else {
      ASSIGN_OR_RETURN(bool done, ring_events_[slot].Done());
      if (!done) return false;
    }
    const float* v = ring_ + slot * kSlotFloats;
    resolved_.push_back({step, Finite(v[4], v)});
    pending_.pop_front();
    return true;
  }

  int device_;
  kernels::Allocator* alloc_;  // the job's pool of device_
  JobEnv* env_;
  StageHandle h2d_, gpu_step_;
  kernels::CudaStream compute_, copy_;
  std::unique_ptr<CudaCopyEngine> engine_;
  std::unique_ptr<GpuStageTimers> timers_;
  std::optional<GpuScope> step_scope_;  // between BeginStep and EndStep; after timers_
  Set sets_[kDrafterContextSets];
  int next_set_ = 0;
  Set* current_ = nullptr;
  kernels::PinnedAllocator pinned_;
  kernels::Tensor ring_storage_;  // pinned f32 [kRing * kSlotFloats]
  float* ring_ = nullptr;         // its data: [kRing][kSlotFloats]
  std::vector<kernels::CudaEvent> ring_events_;
  std::deque<int64_t> pending_;  // steps whose flags are in flight, oldest first
  std::vector<StepFlags> resolved_;
};

#endif

}  // namespace

Result<std::unique_ptr<DrafterDevice>> DrafterDevice::Create(kernels::Allocator& alloc,
                                                             int64_t layers,
                                                             int64_t max_tokens,
                                                             int64_t hidden, JobEnv* env) {
  if (alloc.device().is_cpu()) return std::unique_ptr<DrafterDevice>(new CpuDrafterDevice(env));
#ifdef TANDEM_HAVE_CUDA
  auto d = std::make_unique<CudaDrafterDevice>(&alloc, env);
  RETURN_IF_ERROR(d->Init(layers, max_tokens, hidden));
  return std::unique_ptr<DrafterDevice>(std::move(d));
#else
  (void)layers, (void)max_tokens, (void)hidden;
  return InvalidArgumentError("this build has no CUDA");
#endif
}

}  // namespace tandem::dflash
