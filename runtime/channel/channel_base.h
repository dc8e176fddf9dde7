// The type-independent half of channels: options, the stats snapshot, and ChannelBase, the
// interface a ChannelRegistry holds channels of any item type through.
//
// Stats say who waits on whom: a full channel with blocked producers means the consumers are
// the bottleneck; an empty one with blocked consumers (or depth stuck just under min_ready)
// means the producers are.
//
// Thread-safety: ChannelBase methods are safe from any thread. ChannelOptions and
// ChannelStats are plain values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <typeinfo>

#include "runtime/core/status.h"

namespace tandem {

// Which consumer gets which item (see channel.h for the full contract).
enum class ChannelRoute {
  // One shared FIFO: whichever consumer asks first takes the oldest item. Producer and
  // consumer indices are ignored.
  kAny,
  // Lanes: producer p's s-th item goes to consumer (s * producers + p) % consumers, and each
  // consumer takes its items in that global order, so what each consumer sees depends only
  // on what each producer produced, never on thread timing.
  kReplica,
};
std::string_view ChannelRouteName(ChannelRoute route);  // "any", "replica"
// InvalidArgument listing the names for anything else.
Result<ChannelRoute> ParseChannelRoute(std::string_view name);

struct ChannelOptions {
  // Most items held at once; a push into a full channel waits. REQUIRES: >= 1, and
  // >= consumers under kReplica (each consumer's share must hold an item).
  size_t capacity = 1;
  // A consumer waits until at least this many items are queued (or the channel is closed)
  // before it takes any. 0 behaves as 1. REQUIRES: <= capacity, and <= capacity / consumers
  // under kReplica (the smallest consumer's share: items queued for *that* consumer count).
  size_t min_ready = 1;
  ChannelRoute route = ChannelRoute::kAny;
  // Producer and consumer replicas (kReplica routes by them; kAny ignores them). REQUIRES: >= 1.
  int producers = 1;
  int consumers = 1;
};

// InvalidArgument naming the channel and the bad field, or OK.
Status ValidateChannelOptions(std::string_view name, const ChannelOptions& options);

struct ChannelStats {
  std::string name;
  std::string item_type;  // demangled C++ type, "" for a declared channel not yet opened
  size_t capacity = 0;
  size_t min_ready = 0;
  std::string route = "any";  // ChannelRouteName
  int producers = 0;          // kReplica: the lanes are producers x consumers
  int consumers = 0;
  size_t depth = 0;      // items queued now
  size_t max_depth = 0;  // high-water mark of depth
  bool closed = false;
  uint64_t total_pushed = 0;
  uint64_t total_popped = 0;  // items, not calls (a batch pop of 5 counts 5)
  // Operations that had to block, and the time they spent blocked (cumulative).
  uint64_t push_waits = 0;
  uint64_t pop_waits = 0;
  int64_t push_wait_total_ns = 0;
  int64_t pop_wait_total_ns = 0;
  // Recent wait per operation: exponential moving average over push (pop) calls with
  // weight 1/8 for the newest call, counting calls that did not block as 0 ns.
  double recent_push_wait_ns = 0;
  double recent_pop_wait_ns = 0;
  // Threads blocked in this channel right now.
  int blocked_producers = 0;
  int blocked_consumers = 0;
};

// One line for logs and `tandem status`, e.g.
// "hidden: depth 9/60 min_ready 10, pushed 120 popped 111, push wait 0.000s (recent 0.0ms),
//  pop wait 31.2s (recent 2500.0ms), blocked 0 producers / 3 consumers"; a kReplica channel
// adds its lanes after min_ready ("min_ready 1, lanes 2x3").
std::string FormatChannelStats(const ChannelStats& stats);

// Demangled name of a C++ type ("tandem::ObjectRef").
std::string DemangledTypeName(const std::type_info& type);

class ChannelBase {
 public:
  virtual ~ChannelBase() = default;
  virtual const std::string& name() const = 0;
  virtual const std::type_info& item_type() const = 0;
  virtual ChannelStats Stats() const = 0;
  // Producers get Unavailable from now on; consumers drain what is queued, then get
  // Unavailable. Idempotent.
  virtual void Close() = 0;
  // Producer replica `producer` writes no more (see Channel<T>::FinishProducer).
  virtual Status FinishProducer(int producer) = 0;
};

}  // namespace tandem
