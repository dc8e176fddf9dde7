#include "runtime/channel/channel_base.h"

#include <cxxabi.h>

#include <cstdlib>
#include <memory>

namespace tandem {

std::string_view ChannelRouteName(ChannelRoute route) {
  return route == ChannelRoute::kReplica ? "replica" : "any";
}

Result<ChannelRoute> ParseChannelRoute(std::string_view name) {
  if (name == "any") return ChannelRoute::kAny;
  if (name == "replica") return ChannelRoute::kReplica;
  return InvalidArgumentError("unknown channel route '{}'; expected \"any\" or \"replica\"", name);
}

Status ValidateChannelOptions(std::string_view name, const ChannelOptions& options) {
  if (options.capacity == 0) {
    return InvalidArgumentError("channel '{}': capacity must be at least 1", name);
  }
  if (options.min_ready > options.capacity) {
    return InvalidArgumentError(
        "channel '{}': min_ready ({}) exceeds capacity ({}); consumers would wait forever. "
        "Lower min_ready or raise capacity",
        name, options.min_ready, options.capacity);
  }
  if (options.producers < 1 || options.consumers < 1) {
    return InvalidArgumentError(
        "channel '{}': {} producers and {} consumers; each must be at "
        "least 1",
        name, options.producers, options.consumers);
  }
  if (options.route != ChannelRoute::kReplica) return Status::Ok();
  const size_t consumers = static_cast<size_t>(options.consumers);
  if (options.capacity < consumers) {
    return InvalidArgumentError(
        "channel '{}': route \"replica\" splits capacity {} among {} consumers, leaving some "
        "with no room; raise capacity to at least {}",
        name, options.capacity, consumers, consumers);
  }
  if (options.min_ready > options.capacity / consumers) {
    return InvalidArgumentError(
        "channel '{}': route \"replica\" gives each of {} consumers {} of capacity {} (at "
        "least), fewer than min_ready ({}); consumers would wait forever. Raise capacity to "
        "at least {} or lower min_ready",
        name, consumers, options.capacity / consumers, options.capacity, options.min_ready,
        options.min_ready * consumers);
  }
  return Status::Ok();
}

std::string FormatChannelStats(const ChannelStats& s) {
  return fmt::format(
      "{}: depth {}/{} min_ready {}{}{}, pushed {} popped {}, push wait {:.3f}s (recent "
      "{:.1f}ms), pop wait {:.3f}s (recent {:.1f}ms), blocked {} producers / {} consumers",
      s.name, s.depth, s.capacity, s.min_ready,
      s.route == "replica" ? fmt::format(", lanes {}x{}", s.producers, s.consumers) : "",
      s.closed ? " (closed)" : "", s.total_pushed, s.total_popped, s.push_wait_total_ns * 1e-9,
      s.recent_push_wait_ns * 1e-6, s.pop_wait_total_ns * 1e-9, s.recent_pop_wait_ns * 1e-6,
      s.blocked_producers, s.blocked_consumers);
}

std::string DemangledTypeName(const std::type_info& type) {
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(
      abi::__cxa_demangle(type.name(), nullptr, nullptr, &status), std::free);
  return status == 0 && name ? std::string(name.get()) : std::string(type.name());
}

}  // namespace tandem
