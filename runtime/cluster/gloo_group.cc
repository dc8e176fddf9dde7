// GlooGroup: see gloo_group.h.
#include "runtime/cluster/gloo_group.h"

#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gloo/common/error.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include "runtime/cluster/slice_average.h"
#include "runtime/core/thread_annotations.h"

namespace tandem::cluster {
namespace {

// The slot prefix of this group's messages (Gloo's own collectives use 0x01..0x08).
constexpr uint8_t kSlotPrefix = 0x54;
// How often the watch thread looks at the cluster's health.
constexpr auto kWatchPeriod = std::chrono::milliseconds(100);

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

// One message of an exchange: `bytes` at `data` to (send) or from (recv) rank `peer`.
struct Transfer {
  int peer;
  void* data;
  size_t bytes;
  bool send;
};

}  // namespace

class GlooGroup::Impl {
 public:
  std::string name;
  std::shared_ptr<gloo::rendezvous::Context> context;
  ClusterNode* node = nullptr;
  uint32_t tag = 0;  // the collective's thread only
  bool broken = false;

  std::mutex mu;
  std::condition_variable cv;
  Status aborted GUARDED_BY(mu);
  bool stop GUARDED_BY(mu) = false;
  std::vector<gloo::transport::UnboundBuffer*> pending GUARDED_BY(mu);
  std::thread watch;

  ~Impl() {
    {
      std::lock_guard lock(mu);
      stop = true;
    }
    cv.notify_all();
    if (watch.joinable()) watch.join();
  }

  std::string What(const char* op) const { return fmt::format("gloo group {}: {}", name, op); }

  Status Aborted() {
    std::lock_guard lock(mu);
    return aborted;
  }

  void Abort(Status why) {
    std::lock_guard lock(mu);
    if (!aborted.ok()) return;
    aborted = std::move(why);
    for (gloo::transport::UnboundBuffer* b : pending) {
      b->abortWaitRecv();
      b->abortWaitSend();
    }
  }

  // Polls the cluster's health; a failed cluster (a node died, hung or failed) aborts the
  // group, waking a collective that waits on that node.
  void Watch() {
    std::unique_lock lock(mu);
    while (!stop && aborted.ok()) {
      cv.wait_for(lock, kWatchPeriod);
      lock.unlock();
      Status cluster = node->failure();
      if (!cluster.ok()) Abort(cluster);
      lock.lock();
    }
  }

  // Posts every transfer of one collective under one slot, then waits for each (the group's
  // timeout per wait). An Abort wakes the waits; the exchange then returns its reason.
  Status Exchange(const char* op, const std::vector<Transfer>& transfers) {
    if (broken)
      return UnavailableError("{}: the group failed before and cannot be used", What(op));
    if (Status a = Aborted(); !a.ok()) {
      broken = true;
      return UnavailableError("{}: aborted: {}", What(op), a.message());
    }
    const uint64_t slot = gloo::Slot::build(kSlotPrefix, tag++);
    std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> bufs;
    bool was_aborted = false;
    Status st = Guard(What(op), [&] {
      for (const Transfer& t : transfers) {
        if (t.bytes == 0) continue;
        auto b = context->createUnboundBuffer(t.data, t.bytes);
        if (t.send) {
          b->send(t.peer, slot);
        } else {
          b->recv(t.peer, slot);
        }
        {
          std::lock_guard lock(mu);
          pending.push_back(b.get());
          if (!aborted.ok()) {  // an Abort that came before this buffer existed
            b->abortWaitRecv();
            b->abortWaitSend();
          }
        }
        bufs.push_back(std::move(b));
      }
      size_t i = 0;
      for (const Transfer& t : transfers) {
        if (t.bytes == 0) continue;
        gloo::transport::UnboundBuffer* b = bufs[i++].get();
        if (!(t.send ? b->waitSend() : b->waitRecv())) {
          was_aborted = true;
          return;
        }
      }
    });
    {
      std::lock_guard lock(mu);
      pending.clear();
    }
    if (was_aborted) st = UnavailableError("{}: aborted: {}", What(op), Aborted().message());
    if (!st.ok() && !was_aborted) st = Explain(st);
    if (!st.ok()) broken = true;
    return st;
  }

  // A wait failed on its own (a peer's connection closed, or the timeout). A lost node is the
  // usual cause, and the heartbeats name it within node_timeout: wait that long for their
  // verdict, so the error says which node and at which step.
  Status Explain(const Status& st) {
    const NodeOptions& o = node->options();
    const auto deadline = std::chrono::steady_clock::now() + o.node_timeout +
                          2 * o.heartbeat_interval;
    std::unique_lock lock(mu);
    while (aborted.ok() && std::chrono::steady_clock::now() < deadline)
      cv.wait_for(lock, kWatchPeriod);
    if (aborted.ok()) return st;
    return UnavailableError("{}; the cluster failed: {}", st.message(), aborted.message());
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
  impl->node = node;
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
  Impl* raw = impl.get();
  impl->watch = std::thread([raw] { raw->Watch(); });
  return std::unique_ptr<GlooGroup>(new GlooGroup(rank, size, std::move(impl)));
}

void GlooGroup::Abort(const Status& why) { impl_->Abort(why); }

Status GlooGroup::AverageInRankOrder(float* data, int64_t n) {
  if (n < 0) return InvalidArgumentError("gloo group {}: {} elements", impl_->name, n);
  const SliceRange mine = RankSlice(n, size_, rank_);
  // copies[r * len, (r+1) * len): rank r's copy of this rank's slice.
  std::vector<float> copies(static_cast<size_t>(size_ * mine.size()));
  std::vector<float> average(static_cast<size_t>(mine.size()));
  // Every rank sends each peer that peer's slice of its data and receives the peers' copies
  // of its own slice.
  std::vector<Transfer> exchange;
  for (int r = 0; r < size_; ++r) {
    const SliceRange theirs = RankSlice(n, size_, r);
    if (r == rank_) {
      std::copy(data + mine.lo, data + mine.hi, copies.data() + r * mine.size());
      continue;
    }
    exchange.push_back({r, data + theirs.lo, theirs.size() * sizeof(float), true});
    exchange.push_back({r, copies.data() + r * mine.size(), mine.size() * sizeof(float), false});
  }
  RETURN_IF_ERROR(impl_->Exchange("average: exchanging slices", exchange));
  std::vector<const float*> inputs(size_);
  for (int r = 0; r < size_; ++r) inputs[r] = copies.data() + r * mine.size();
  cluster::AverageInRankOrder(inputs.data(), size_, 0, mine.size(), average.data());
  // Then every rank sends its averaged slice to every peer and receives theirs in place.
  std::vector<Transfer> gather;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    const SliceRange theirs = RankSlice(n, size_, r);
    gather.push_back({r, average.data(), mine.size() * sizeof(float), true});
    gather.push_back({r, data + theirs.lo, theirs.size() * sizeof(float), false});
  }
  RETURN_IF_ERROR(impl_->Exchange("average: gathering slices", gather));
  std::copy(average.begin(), average.end(), data + mine.lo);
  return Status::Ok();
}

Status GlooGroup::Broadcast(void* data, size_t bytes, int root) {
  if (root < 0 || root >= size_)
    return InvalidArgumentError("gloo group {}: broadcast root {} of {}", impl_->name, root,
                                size_);
  std::vector<Transfer> transfers;
  if (rank_ == root) {
    for (int r = 0; r < size_; ++r)
      if (r != root) transfers.push_back({r, data, bytes, true});
  } else {
    transfers.push_back({root, data, bytes, false});
  }
  return impl_->Exchange("broadcast", transfers);
}

Status GlooGroup::AllGather(const void* in, size_t bytes, void* out) {
  char* o = static_cast<char*>(out);
  std::copy_n(static_cast<const char*>(in), bytes, o + rank_ * bytes);
  std::vector<Transfer> transfers;
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    transfers.push_back({r, o + rank_ * bytes, bytes, true});
    transfers.push_back({r, o + r * bytes, bytes, false});
  }
  return impl_->Exchange("allgather", transfers);
}

Status GlooGroup::Barrier() {
  char token = 1;
  std::vector<char> all(size_);
  return AllGather(&token, 1, all.data());
}

}  // namespace tandem::cluster
