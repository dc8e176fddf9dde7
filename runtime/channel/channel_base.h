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

struct ChannelOptions {
  // Most items held at once; a push into a full channel waits. REQUIRES: >= 1.
  size_t capacity = 1;
  // A consumer waits until at least this many items are queued (or the channel is closed)
  // before it takes any. 0 behaves as 1. REQUIRES: <= capacity.
  size_t min_ready = 1;
};

// InvalidArgument naming the channel and the bad field, or OK.
Status ValidateChannelOptions(std::string_view name, const ChannelOptions& options);

struct ChannelStats {
  std::string name;
  std::string item_type;  // demangled C++ type, "" for a declared channel not yet opened
  size_t capacity = 0;
  size_t min_ready = 0;
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
//  pop wait 31.2s (recent 2500.0ms), blocked 0 producers / 3 consumers".
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
};

}  // namespace tandem
