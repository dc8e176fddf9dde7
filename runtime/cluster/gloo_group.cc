// GlooGroup: see gloo_group.h.
#include "runtime/cluster/gloo_group.h"

#include <exception>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gloo/allgather.h>
#include <gloo/allgatherv.h>
#include <gloo/alltoallv.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include "runtime/cluster/slice_average.h"

namespace tandem::cluster {
namespace {

std::chrono::milliseconds Ms(Duration d) {
  return std::max(std::chrono::milliseconds(1),
                  std::chrono::duration_cast<std::chrono::milliseconds>(d));
}

// Gloo's rendezvous store over the cluster head's key-value service. Gloo expects failures
// as exceptions; they are caught again in GlooGroup::Create.
class KvStore final : public gloo::rendezvous::Store {
 public:
  KvStore(ClusterNode* node, std::string prefix, Duration timeout)
      : node_(node), prefix_(std::move(prefix)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    Status st = node_->KvPut(prefix_ + key, std::string(data.begin(), data.end()));
    if (!st.ok()) throw gloo::IoException(st.ToString());
  }
  std::vector<char> get(const std::string& key) override {
    Result<std::string> v = node_->KvGet(prefix_ + key, timeout_);
    if (!v.ok()) throw gloo::IoException(v.status().ToString());
    return std::vector<char>(v->begin(), v->end());
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, Ms(timeout_)); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    for (const std::string& key : keys) {
      Result<std::string> v = node_->KvGet(prefix_ + key, timeout);
      if (!v.ok()) throw gloo::IoException(v.status().ToString());
    }
  }

 private:
  ClusterNode* node_;
  const std::string prefix_;
  const Duration timeout_;
};

// Runs a Gloo call, turning its exceptions into Unavailable naming the group and the call.
template <typename Fn>
Status Guard(const std::string& what, Fn fn) {
  try {
    fn();
    return Status::Ok();
  } catch (const std::exception& e) {
    return UnavailableError("{}: {}", what, e.what());
  }
}

}  // namespace

class GlooGroup::Impl {
 public:
  std::string name;
  std::shared_ptr<gloo::rendezvous::Context> context;
  uint32_t tag = 0;
  bool broken = false;

  std::string What(const char* op) const { return fmt::format("gloo group {}: {}", name, op); }
  Status Run(const char* op, const std::function<void()>& fn) {
    if (broken)
      return UnavailableError("{}: the group failed before and cannot be used", What(op));
    Status st = Guard(What(op), fn);
    if (!st.ok()) broken = true;
    return st;
  }
};

GlooGroup::GlooGroup(int rank, int size, std::unique_ptr<Impl> impl)
    : rank_(rank), size_(size), impl_(std::move(impl)) {}
GlooGroup::~GlooGroup() = default;

Result<std::unique_ptr<GlooGroup>> GlooGroup::Create(ClusterNode* node, const std::string& name,
                                                     int rank, int size,
                                                     const std::string& address,
                                                     Duration timeout) {
  if (size < 1 || rank < 0 || rank >= size)
    return InvalidArgumentError("gloo group {}: rank {} of {}", name, rank, size);
  auto impl = std::make_unique<Impl>();
  impl->name = name;
  KvStore store(node, fmt::format("gloo/{}/", name), timeout);
  Status st = Guard(fmt::format("gloo group {}: connecting rank {} of {} on {}", name, rank,
                                size, address),
                    [&] {
                      gloo::transport::tcp::attr attr;
                      attr.hostname = address;
                      auto dev = gloo::transport::tcp::CreateDevice(attr);
                      auto ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
                      ctx->setTimeout(Ms(timeout));
                      ctx->connectFullMesh(store, dev);
                      impl->context = std::move(ctx);
                    });
  if (!st.ok()) return st;
  return std::unique_ptr<GlooGroup>(new GlooGroup(rank, size, std::move(impl)));
}

Status GlooGroup::AverageInRankOrder(float* data, int64_t n) {
  if (n < 0) return InvalidArgumentError("gloo group {}: {} elements", impl_->name, n);
  const SliceRange mine = RankSlice(n, size_, rank_);
  std::vector<int64_t> send_counts(size_);
  std::vector<size_t> gather_counts(size_);
  for (int r = 0; r < size_; ++r) {
    send_counts[r] = RankSlice(n, size_, r).size();
    gather_counts[r] = static_cast<size_t>(send_counts[r]);
  }
  // copies[r * len, (r+1) * len): rank r's copy of this rank's slice. One spare element so
  // Gloo never sees a null buffer when this rank's slice is empty.
  std::vector<float> copies(static_cast<size_t>(size_ * mine.size()) + 1);
  std::vector<float> average(static_cast<size_t>(mine.size()) + 1);
  float dummy = 0.f;
  float* in = n > 0 ? data : &dummy;
  auto& ctx = impl_->context;
  RETURN_IF_ERROR(impl_->Run("average: exchanging slices", [&] {
    gloo::AlltoallvOptions opts(ctx);
    opts.setInput(in, send_counts);
    opts.setOutput(copies.data(), std::vector<int64_t>(size_, mine.size()));
    opts.setTag(impl_->tag++);
    gloo::alltoallv(opts);
  }));
  std::vector<const float*> inputs(size_);
  for (int r = 0; r < size_; ++r) inputs[r] = copies.data() + r * mine.size();
  cluster::AverageInRankOrder(inputs.data(), size_, 0, mine.size(), average.data());
  return impl_->Run("average: gathering slices", [&] {
    gloo::AllgathervOptions opts(ctx);
    opts.setInput(average.data(), static_cast<size_t>(mine.size()));
    opts.setOutput(in, gather_counts);
    opts.setTag(impl_->tag++);
    gloo::allgatherv(opts);
  });
}

Status GlooGroup::Broadcast(void* data, size_t bytes, int root) {
  if (root < 0 || root >= size_)
    return InvalidArgumentError("gloo group {}: broadcast root {} of {}", impl_->name, root,
                                size_);
  return impl_->Run("broadcast", [&] {
    gloo::BroadcastOptions opts(impl_->context);
    opts.setOutput(static_cast<char*>(data), bytes);
    opts.setRoot(root);
    opts.setTag(impl_->tag++);
    gloo::broadcast(opts);
  });
}

Status GlooGroup::AllGather(const void* in, size_t bytes, void* out) {
  return impl_->Run("allgather", [&] {
    gloo::AllgatherOptions opts(impl_->context);
    opts.setInput(const_cast<char*>(static_cast<const char*>(in)), bytes);
    opts.setOutput(static_cast<char*>(out), bytes * size_);
    opts.setTag(impl_->tag++);
    gloo::allgather(opts);
  });
}

Status GlooGroup::Barrier() {
  return impl_->Run("barrier", [&] {
    gloo::BarrierOptions opts(impl_->context);
    opts.setTag(impl_->tag++);
    gloo::barrier(opts);
  });
}

}  // namespace tandem::cluster
