// GradientAllReduce: see grad_allreduce.h.
#include "actors/dflash/grad_allreduce.h"

#include <algorithm>
#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <utility>
#include <vector>

#include "kernels/comm/nccl.h"
#include "runtime/cluster/slice_average.h"
#include "runtime/core/thread_annotations.h"

namespace tandem::dflash {
namespace {

// What the replicas of one group share: a reusable barrier that breaks for good when a
// replica leaves, the CPU path's buffers, and the NCCL unique id.
class Rendezvous {
 public:
  Rendezvous(int nranks, kernels::NcclUniqueId id)
      : nranks_(nranks), id_(id), inputs_(nranks, nullptr) {}

  int nranks() const { return nranks_; }
  const kernels::NcclUniqueId& nccl_id() const { return id_; }

  // Waits until all ranks arrived (Ok) or some rank left (the reason).
  Status Arrive() {
    std::unique_lock lock(mu_);
    if (!left_.ok()) return left_;
    const uint64_t gen = generation_;
    if (++arrived_ == nranks_) {
      arrived_ = 0;
      ++generation_;
      cv_.notify_all();
      return Status::Ok();
    }
    cv_.wait(lock, [&] { return generation_ != gen || !left_.ok(); });
    return generation_ != gen ? Status::Ok() : left_;
  }

  void Leave(Status why) {
    std::lock_guard lock(mu_);
    if (left_.ok()) left_ = std::move(why);
    cv_.notify_all();
  }
  Status left() const {
    std::lock_guard lock(mu_);
    return left_;
  }

  // CPU path: rank r's grads are inputs_[r] while the ranks are between the two barriers.
  Status CpuAverage(int rank, float* grads, int64_t n) {
    {
      std::lock_guard lock(mu_);
      inputs_[rank] = grads;
      if (rank == 0 && static_cast<int64_t>(average_.size()) != n) average_.assign(n, 0.f);
    }
    RETURN_IF_ERROR(Arrive());
    {
      std::lock_guard lock(mu_);
      if (static_cast<int64_t>(average_.size()) != n)
        return InvalidArgumentError("gradient all-reduce: replicas disagree on the size ({} "
                                    "vs {} elements)", average_.size(), n);
    }
    // This rank's slice, summed in rank order, so the result does not depend on who computes
    // (the same arithmetic as the cross-process path, cluster::GlooGroup).
    const cluster::SliceRange slice = cluster::RankSlice(n, nranks_, rank);
    cluster::AverageInRankOrder(inputs_.data(), nranks_, slice.lo, slice.size(),
                                average_.data() + slice.lo);
    RETURN_IF_ERROR(Arrive());
    // average_ is only written again after the next step's first barrier, which this rank
    // reaches only after this copy.
    std::copy(average_.begin(), average_.end(), grads);
    return Status::Ok();
  }

 private:
  const int nranks_;
  const kernels::NcclUniqueId id_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ GUARDED_BY(mu_) = 0;
  uint64_t generation_ GUARDED_BY(mu_) = 0;
  Status left_ GUARDED_BY(mu_);
  std::vector<float*> inputs_;  // written under mu_ before the first barrier, read after it
  std::vector<float> average_;  // [n]; slices written between the barriers, read after
};

// The job's rendezvous by group (in its JobRegistry). An entry stays until every rank has
// joined it and all joined replicas have let go, so a replica that fails before another
// joins still leaves its reason for the late one (and a restarted replica finds the group
// broken).
struct Entry {
  std::shared_ptr<Rendezvous> rv;
  int joined = 0;   // joins so far (restarts count again)
  int holders = 0;  // replicas holding it now
};
struct RendezvousTable {
  std::mutex mu;
  std::map<std::string, Entry> by_group;  // GUARDED_BY(mu)

  Result<std::shared_ptr<Rendezvous>> Acquire(const std::string& group, int nranks,
                                              bool cuda) {
    std::lock_guard lock(mu);
    Entry& e = by_group[group];
    if (e.rv == nullptr) {
      kernels::NcclUniqueId id{};
      if (cuda) {
        ASSIGN_OR_RETURN(id, kernels::NcclComm::NewUniqueId());
      }
      e.rv = std::make_shared<Rendezvous>(nranks, id);
    }
    if (e.rv->nranks() != nranks)
      return InvalidArgumentError("gradient all-reduce {}: {} replicas joined a group of {}",
                                  group, nranks, e.rv->nranks());
    ++e.joined;
    ++e.holders;
    return e.rv;
  }

  void Release(const std::string& group) {
    std::lock_guard lock(mu);
    auto it = by_group.find(group);
    if (it == by_group.end()) return;
    if (--it->second.holders == 0 && it->second.joined >= it->second.rv->nranks())
      by_group.erase(it);
  }
};

// Common part: the rendezvous membership and leaving it exactly once.
class Member : public GradientAllReduce {
 public:
  Member(RendezvousTable* table, std::string group, int nranks, int rank,
         std::shared_ptr<Rendezvous> rv)
      : GradientAllReduce(rank, nranks), table_(table), group_(std::move(group)),
        rv_(std::move(rv)) {}
  ~Member() override {
    Leave(std::uncaught_exceptions() > 0 ? "it threw an exception" : "it finished its steps");
    rv_.reset();
    table_->Release(group_);
  }
  void Leave(const std::string& why) override {
    if (left_) return;
    left_ = true;
    rv_->Leave(UnavailableError("gradient all-reduce of group {}: replica {} left after {} "
                                "all-reduces: {}", group_, rank(), steps_, why));
  }

 protected:
  Rendezvous& rv() { return *rv_; }
  Status Counted(Status s) {
    if (s.ok()) ++steps_;
    return s;
  }

 private:
  RendezvousTable* table_;  // the job's; outlives its replicas
  std::string group_;
  std::shared_ptr<Rendezvous> rv_;
  bool left_ = false;
  int64_t steps_ = 0;
};

class CpuAllReduce final : public Member {
 public:
  using Member::Member;
  Status AllReduceAvg(const kernels::TensorView& grads, kernels::Stream) override {
    if (grads.dtype() != kernels::DType::kF32 || !grads.is_contiguous() ||
        !grads.device().is_cpu())
      return InvalidArgumentError("gradient all-reduce (CPU): grads must be contiguous f32 "
                                  "on the CPU");
    return Counted(rv().CpuAverage(rank(), static_cast<float*>(grads.data()), grads.numel()));
  }
};

// Colocated CUDA replicas (several on one GPU) are refused by NCCL itself at Create.
class NcclAllReduce final : public Member {
 public:
  using Member::Member;
  // Blocks until every rank joined its communicator on its GPU.
  Status Init(int device) {
    // Everyone is here (or someone already failed) before blocking in NCCL's init.
    RETURN_IF_ERROR(rv().Arrive());
    Result<std::unique_ptr<kernels::NcclComm>> comm =
        kernels::NcclComm::Create(rv().nccl_id(), size(), rank(), device);
    if (!comm.ok()) {
      Leave(comm.status().ToString());
      return comm.status();
    }
    comm_ = std::move(*comm);
    return Status::Ok();
  }
  Status AllReduceAvg(const kernels::TensorView& grads, kernels::Stream stream) override {
    // Host-side only: notices a departed replica before NCCL would wait for it forever.
    RETURN_IF_ERROR(rv().Arrive());
    return Counted(comm_->AllReduce(grads, grads, kernels::ReduceOp::kAvg, stream));
  }

 private:
  std::unique_ptr<kernels::NcclComm> comm_;
};

}  // namespace

Result<std::unique_ptr<GradientAllReduce>> JoinGradientAllReduce(JobRegistry& registry,
                                                                 const std::string& group,
                                                                 int nranks, int rank,
                                                                 kernels::Device device) {
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return InvalidArgumentError("gradient all-reduce {}: rank {} of {}", group, rank, nranks);
  RendezvousTable& table = registry.Get<RendezvousTable>();
  ASSIGN_OR_RETURN(std::shared_ptr<Rendezvous> rv,
                   table.Acquire(group, nranks, device.is_cuda()));
  RETURN_IF_ERROR(rv->left());
  if (device.is_cpu())
    return std::unique_ptr<GradientAllReduce>(
        new CpuAllReduce(&table, group, nranks, rank, std::move(rv)));
  auto nccl = std::make_unique<NcclAllReduce>(&table, group, nranks, rank, std::move(rv));
  RETURN_IF_ERROR(nccl->Init(device.index));
  return std::unique_ptr<GradientAllReduce>(std::move(nccl));
}

}  // namespace tandem::dflash
