// GradientAllReduce across processes: see JoinGradientAllReduceAcrossNodes in
// grad_allreduce.h.
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "actors/dflash/grad_allreduce.h"
#include "kernels/comm/nccl.h"
#include "runtime/cluster/cluster_node.h"
#include "runtime/cluster/gloo_group.h"
#include "runtime/core/thread_annotations.h"

namespace tandem::dflash {
namespace {

// CPU ranks in several processes: a Gloo group, with the in-process path's arithmetic.
class GlooAllReduce final : public GradientAllReduce {
 public:
  GlooAllReduce(std::string group, std::unique_ptr<cluster::GlooGroup> gloo)
      : GradientAllReduce(gloo->rank(), gloo->size()), group_(std::move(group)),
        gloo_(std::move(gloo)) {}

  Status AllReduceAvg(const kernels::TensorView& grads, kernels::Stream) override {
    if (!left_.ok()) return left_;
    if (grads.dtype() != kernels::DType::kF32 || !grads.is_contiguous() ||
        !grads.device().is_cpu())
      return InvalidArgumentError("gradient all-reduce (CPU, across nodes): grads must be "
                                  "contiguous f32 on the CPU");
    Status st = gloo_->AverageInRankOrder(static_cast<float*>(grads.data()), grads.numel());
    if (!st.ok())
      return UnavailableError("gradient all-reduce of group {} across nodes, rank {}, after {} "
                              "all-reduces: {}", group_, rank(), steps_, st.message());
    ++steps_;
    return Status::Ok();
  }
  // The other ranks see this rank's connections close and fail their next all-reduce.
  void Leave(const std::string& why) override {
    if (left_.ok())
      left_ = UnavailableError("gradient all-reduce of group {}: this replica left: {}", group_,
                               why);
    gloo_.reset();
  }

 private:
  std::string group_;
  std::unique_ptr<cluster::GlooGroup> gloo_;
  Status left_;
  int64_t steps_ = 0;
};

// CUDA ranks in several processes: a non-blocking NCCL communicator and a watchdog that
// aborts it when NCCL reports an error or the cluster failed (a peer node is gone), so the
// stream's pending all-reduce ends instead of waiting for the dead peer forever.
class NcclNodesAllReduce final : public GradientAllReduce {
 public:
  NcclNodesAllReduce(std::string group, int rank, int size,
                     std::unique_ptr<kernels::NcclComm> comm, cluster::ClusterNode* node)
      : GradientAllReduce(rank, size), group_(std::move(group)), comm_(std::move(comm)),
        node_(node) {
    watchdog_ = std::thread([this] { Watch(); });
  }
  ~NcclNodesAllReduce() override {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    watchdog_.join();
  }

  Status AllReduceAvg(const kernels::TensorView& grads, kernels::Stream stream) override {
    {
      std::lock_guard lock(mu_);
      if (!failed_.ok()) return failed_;
    }
    return comm_->AllReduce(grads, grads, kernels::ReduceOp::kAvg, stream);
  }
  void Leave(const std::string& why) override {
    Abort(UnavailableError("gradient all-reduce of group {}: replica {} left: {}", group_,
                           rank(), why));
  }

 private:
  void Abort(Status why) {
    {
      std::lock_guard lock(mu_);
      if (!failed_.ok()) return;
      failed_ = std::move(why);
    }
    comm_->Abort();
  }

  void Watch() {
    std::unique_lock lock(mu_);
    while (!stop_ && failed_.ok()) {
      cv_.wait_for(lock, std::chrono::milliseconds(100));
      lock.unlock();
      Status nccl = comm_->AsyncError();
      Status cluster = node_->failure();
      if (!nccl.ok())
        Abort(nccl.WithContext(fmt::format("gradient all-reduce of group {}", group_)));
      else if (!cluster.ok()) Abort(cluster);
      lock.lock();
    }
  }

  const std::string group_;
  std::unique_ptr<kernels::NcclComm> comm_;
  cluster::ClusterNode* node_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ GUARDED_BY(mu_) = false;
  Status failed_ GUARDED_BY(mu_);
  std::thread watchdog_;
};

}  // namespace

Result<std::unique_ptr<GradientAllReduce>> JoinGradientAllReduceAcrossNodes(
    cluster::ClusterNode& node, const std::string& group, int nranks, int rank,
    kernels::Device device, const std::string& address, Duration timeout) {
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return InvalidArgumentError("gradient all-reduce {}: rank {} of {}", group, rank, nranks);
  if (device.is_cpu()) {
    ASSIGN_OR_RETURN(std::unique_ptr<cluster::GlooGroup> gloo,
                     cluster::GlooGroup::Create(&node, "grads/" + group, rank, nranks, address,
                                                timeout));
    return std::unique_ptr<GradientAllReduce>(new GlooAllReduce(group, std::move(gloo)));
  }
  const std::string key = "nccl/grads/" + group;
  kernels::NcclUniqueId id{};
  if (rank == 0) {
    ASSIGN_OR_RETURN(id, kernels::NcclComm::NewUniqueId());
    RETURN_IF_ERROR(node.KvPut(key, std::string(id.begin(), id.end())));
  } else {
    ASSIGN_OR_RETURN(std::string bytes, node.KvGet(key, timeout));
    if (bytes.size() != id.size())
      return DataLossError("gradient all-reduce {}: the NCCL id under '{}' has {} bytes, "
                           "expected {}", group, key, bytes.size(), id.size());
    std::copy(bytes.begin(), bytes.end(), id.begin());
  }
  ASSIGN_OR_RETURN(std::unique_ptr<kernels::NcclComm> comm,
                   kernels::NcclComm::CreateNonBlocking(id, nranks, rank, device.index,
                                                        timeout));
  return std::unique_ptr<GradientAllReduce>(
      new NcclNodesAllReduce(group, rank, nranks, std::move(comm), &node));
}

}  // namespace tandem::dflash
