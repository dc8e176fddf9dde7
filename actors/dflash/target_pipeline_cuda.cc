// The CUDA TargetPipeline (see target_pipeline.h): two device capture sets, so the
// forward of batch n+1 runs while batch n's layers are copied out.
//
// Per Submit (actor thread): wait until capture set n % 2 is free (its `free` event, recorded
// on the postprocess stream after its last D2H); copy the batch metadata into that set's
// pinned staging and upload it on the compute stream; enqueue the forward writing the k
// captured layers into the set's device buffers; record `forward_done`. The postprocess
// stream waits on `forward_done` and copies each layer into its own store object with
// ObjectStore::CopyInto (fenced), then records `free`. The entry (objects + fences) goes to
// the postprocess thread, which waits for the fences, seals the objects and pushes the
// HiddenBatch. The actor thread only blocks for a free capture set, store space, or a full
// postprocess queue (kMaxQueued): all of them backpressure.
//
// Stages: target.forward (GPU, compute stream; also as target.gpu.forward, the name under
// which runtime/job's bottleneck verdict counts an actor's GPU busy time), target.d2h (GPU,
// postprocess stream),
// target.pack (host: staging, object creation, enqueueing), target.set_wait (host: waiting
// for a free capture set), target.push_wait (postprocess thread: channel backpressure).
//
// Thread-safety: Submit/Finish from the actor thread; the postprocess thread shares only
// queue_/error_/busy_ under mu_.
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "actors/dflash/target_pipeline_internal.h"

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/core/cuda_check.h"
#include "kernels/core/memory.h"
#include "kernels/core/pinned_allocator.h"
#include "kernels/core/stream.h"
#include "runtime/profile/gpu_stage_timers.h"
#include "runtime/store/cuda_copy_engine.h"
#endif

namespace tandem::dflash::internal {

#ifdef TANDEM_HAVE_CUDA
namespace {

class CudaPipeline final : public TargetPipeline {
 public:
  static constexpr size_t kMaxQueued = 2;  // batches copied out but not yet pushed

  CudaPipeline(SharedTarget* t, const TargetModelSpec& spec, JobEnv* env,
               Channel<HiddenBatch>* out, int producer, std::string owner)
      : target_(t), spec_(spec), env_(env), out_(out), producer_(producer),
        owner_(std::move(owner)),
        device_(t->device().index),
        forward_(env->profile->Stage("target.forward")),
        gpu_forward_(env->profile->Stage("target.gpu.forward")),
        d2h_(env->profile->Stage("target.d2h")),
        pack_(env->profile->Stage("target.pack")),
        set_wait_(env->profile->Stage("target.set_wait")),
        push_wait_(env->profile->Stage("target.push_wait")) {}

  ~CudaPipeline() override {
    {
      std::lock_guard lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    // Every copy out of the capture sets must finish before their memory goes back.
    CUDA_LOG_IF_ERROR(cudaSetDevice(device_));
    CUDA_LOG_IF_ERROR(cudaStreamSynchronize(compute()));
    if (pp_stream_.get() != nullptr) CUDA_LOG_IF_ERROR(cudaStreamSynchronize(pp_stream_.get()));
  }

  Status Init() {
    CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    ASSIGN_OR_RETURN(pp_stream_, kernels::CudaStream::Create(device_));
    engine_ = std::make_unique<CudaCopyEngine>(pp_stream_.get());
    ASSIGN_OR_RETURN(timers_, GpuStageTimers::Create(env_->profile, 64));
    // The capture sets come from the pool the target was loaded into (the job's, this device).
    kernels::Allocator* pool = &target_->allocator();
    const int64_t tmax = spec_.max_tokens, h = spec_.config.hidden_size;
    for (Set& s : sets_) {
      for (size_t i = 0; i < spec_.layer_ids.size(); ++i) {
        // bf16 [Tmax, H]: written on the compute stream, read on the postprocess stream.
        ASSIGN_OR_RETURN(kernels::Tensor c, kernels::Tensor::Empty(*pool, kernels::DType::kBF16,
                                                                   {tmax, h}, compute()));
        c.RecordStream(pp_stream_.get());
        s.captures.push_back(std::move(c));
      }
      ASSIGN_OR_RETURN(s.ids, kernels::Tensor::Empty(*pool, kernels::DType::kI32, {tmax},
                                                     compute()));
      ASSIGN_OR_RETURN(s.pos, kernels::Tensor::Empty(*pool, kernels::DType::kI32, {tmax},
                                                     compute()));
      ASSIGN_OR_RETURN(s.cu, kernels::Tensor::Empty(*pool, kernels::DType::kI32, {tmax + 1},
                                                    compute()));
      ASSIGN_OR_RETURN(s.h_ids, kernels::Tensor::Empty(pinned_, kernels::DType::kI32, {tmax}));
      ASSIGN_OR_RETURN(s.h_pos, kernels::Tensor::Empty(pinned_, kernels::DType::kI32, {tmax}));
      ASSIGN_OR_RETURN(s.h_cu,
                       kernels::Tensor::Empty(pinned_, kernels::DType::kI32, {tmax + 1}));
      ASSIGN_OR_RETURN(s.forward_done, kernels::CudaEvent::Create(device_));
      ASSIGN_OR_RETURN(s.free, kernels::CudaEvent::Create(device_));
    }
    thread_ = std::thread([this] { PostprocessLoop(); });
    return Status::Ok();
  }

  Status Submit(data::TokenBatch batch, data::DataPosition next, int replica) override {
    RETURN_IF_ERROR(FirstError());
    CUDA_RETURN_IF_ERROR(cudaSetDevice(device_));
    Set& s = sets_[next_set_];
    next_set_ = (next_set_ + 1) % 2;
    {
      ScopedTimer timer(set_wait_);
      if (s.used) CUDA_RETURN_IF_ERROR(cudaEventSynchronize(s.free.get()));
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return queue_.size() < kMaxQueued || !error_.ok(); });
      if (!error_.ok()) return error_;
    }
    s.used = true;
    Entry e;
    e.batch = MakeShell(std::move(batch), next, replica, producer_, spec_);
    const data::TokenBatch& b = e.batch.tokens;
    const int64_t t = b.tokens(), h = spec_.config.hidden_size;
    const int64_t docs = b.documents();
    if (t > spec_.max_tokens)
      return InvalidArgumentError("{}: batch of {} tokens > max_tokens {}", owner_, t,
                                  spec_.max_tokens);
    {
      ScopedTimer timer(pack_);
      std::memcpy(s.h_ids.data(), b.input_ids.data(), t * sizeof(int32_t));
      std::memcpy(s.h_pos.data(), b.position_ids.data(), t * sizeof(int32_t));
      std::memcpy(s.h_cu.data(), b.cu_seqlens.data(), (docs + 1) * sizeof(int32_t));
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s.ids.data(), s.h_ids.data(), t * sizeof(int32_t),
                                           cudaMemcpyHostToDevice, compute()));
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s.pos.data(), s.h_pos.data(), t * sizeof(int32_t),
                                           cudaMemcpyHostToDevice, compute()));
      CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(s.cu.data(), s.h_cu.data(),
                                           (docs + 1) * sizeof(int32_t),
                                           cudaMemcpyHostToDevice, compute()));
    }
    const kernels::Device dev = target_->device();
    std::vector<models::LayerCapture> caps;
    for (size_t i = 0; i < spec_.layer_ids.size(); ++i)
      caps.push_back({static_cast<int>(spec_.layer_ids[i]),
                      kernels::TensorView(s.captures[i].data(), kernels::DType::kBF16, {t, h},
                                          dev)});
    models::PackedBatch pb{kernels::TensorView(s.ids.data(), kernels::DType::kI32, {t}, dev),
                           kernels::TensorView(s.pos.data(), kernels::DType::kI32, {t}, dev),
                           kernels::TensorView(s.cu.data(), kernels::DType::kI32, {docs + 1},
                                               dev),
                           b.max_seqlen};
    {
      GpuScope scope = timers_->Scope(forward_, compute());
      GpuScope busy = timers_->Scope(gpu_forward_, compute());
      RETURN_IF_ERROR(target_->Forward(pb, caps));
    }
    RETURN_IF_ERROR(s.forward_done.Record(compute()));
    {
      ScopedTimer timer(pack_);
      const uint64_t bytes = static_cast<uint64_t>(t * h) * sizeof(kernels::bf16);
      // Objects first (may wait for store space), then the copies, so the postprocess
      // stream is never left waiting on a half-enqueued batch.
      for (size_t i = 0; i < caps.size(); ++i) {
        ASSIGN_OR_RETURN(MutableObject obj, env_->store->Create(bytes, owner_));
        e.objects.push_back(std::move(obj));
      }
      RETURN_IF_ERROR(pp_stream_.Wait(s.forward_done));
      GpuScope scope = timers_->Scope(d2h_, pp_stream_.get());
      for (size_t i = 0; i < caps.size(); ++i) {
        ASSIGN_OR_RETURN(auto fence, env_->store->CopyInto(e.objects[i], 0,
                                                           s.captures[i].data(), bytes,
                                                           *engine_));
        e.fences.push_back(std::move(fence));
      }
      scope.End();
      RETURN_IF_ERROR(s.free.Record(pp_stream_.get()));
    }
    {
      std::lock_guard lock(mu_);
      queue_.push_back(std::move(e));
    }
    cv_.notify_all();
    return Status::Ok();
  }

  Status Finish() override {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return (queue_.empty() && !busy_) || !error_.ok(); });
    return error_;
  }

 private:
  struct Set {
    std::vector<kernels::Tensor> captures;  // k x bf16 [Tmax, H]
    kernels::Tensor ids, pos, cu;           // i32 [Tmax], [Tmax], [Tmax+1] on the device
    kernels::Tensor h_ids, h_pos, h_cu;     // their pinned staging (pinned_)
    kernels::CudaEvent forward_done;        // compute stream: the forward into this set
    kernels::CudaEvent free;                // postprocess stream: its last D2H
    bool used = false;                      // `free` has been recorded
  };
  struct Entry {
    HiddenBatch batch;
    std::vector<MutableObject> objects;                     // [k]
    std::vector<std::shared_ptr<const CopyFence>> fences;  // [k]
  };

  cudaStream_t compute() const { return static_cast<cudaStream_t>(target_->stream()); }

  Status FirstError() {
    std::lock_guard lock(mu_);
    return error_;
  }

  void PostprocessLoop() {
    CUDA_LOG_IF_ERROR(cudaSetDevice(device_));
    while (true) {
      Entry e;
      {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return !queue_.empty() || stopping_; });
        if (queue_.empty()) return;
        e = std::move(queue_.front());
        queue_.pop_front();
        busy_ = true;
      }
      cv_.notify_all();  // room in the queue
      Status st = Status::Ok();
      for (const auto& f : e.fences) {
        // The copies take milliseconds; a stuck one means the device is gone.
        st = f->Wait(std::chrono::minutes(2));
        if (!st.ok()) break;
      }
      if (st.ok()) {
        for (MutableObject& o : e.objects) e.batch.layers.push_back(o.Seal());
        timers_->Poll();
        ScopedTimer timer(push_wait_);
        st = out_->PushFrom(producer_, std::move(e.batch));
      }
      {
        std::lock_guard lock(mu_);
        busy_ = false;
        if (!st.ok() && error_.ok()) error_ = st;
      }
      cv_.notify_all();
    }
  }

  SharedTarget* target_;
  TargetModelSpec spec_;
  JobEnv* env_;
  Channel<HiddenBatch>* out_;
  int producer_;
  std::string owner_;
  int device_;
  StageHandle forward_, gpu_forward_, d2h_, pack_, set_wait_, push_wait_;
  kernels::PinnedAllocator pinned_;  // before sets_: outlives their staging
  kernels::CudaStream pp_stream_;
  std::unique_ptr<CudaCopyEngine> engine_;
  std::unique_ptr<GpuStageTimers> timers_;
  Set sets_[2];
  int next_set_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Entry> queue_;   // GUARDED_BY(mu_)
  bool busy_ = false;         // GUARDED_BY(mu_): the thread holds an entry
  bool stopping_ = false;     // GUARDED_BY(mu_)
  Status error_;              // GUARDED_BY(mu_): first failure (Unavailable: channel closed)
  std::thread thread_;
};

}  // namespace

Result<std::unique_ptr<TargetPipeline>> MakeCudaPipeline(SharedTarget* target,
                                                         const TargetModelSpec& spec,
                                                         JobEnv* env, Channel<HiddenBatch>* out,
                                                         int producer, std::string owner) {
  auto p = std::make_unique<CudaPipeline>(target, spec, env, out, producer, std::move(owner));
  RETURN_IF_ERROR(p->Init());
  return std::unique_ptr<TargetPipeline>(std::move(p));
}

#else

// Without CUDA, ActorDevice never names a GPU, so no target reaches this.
Result<std::unique_ptr<TargetPipeline>> MakeCudaPipeline(SharedTarget*, const TargetModelSpec&,
                                                         JobEnv*, Channel<HiddenBatch>*, int,
                                                         std::string owner) {
  return UnavailableError("{}: this build has no CUDA", owner);
}

#endif

}  // namespace tandem::dflash::internal
