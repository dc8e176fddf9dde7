#include "runtime/store/store_stats.h"

#include <fmt/format.h>

#include "runtime/core/clock.h"

namespace tandem {

std::string StoreStats::HoldersSummary() const {
  if (owners.empty()) return "no objects are held";
  std::string out;
  for (const OwnerStats& o : owners) {
    if (!out.empty()) out += "; ";
    out += fmt::format("'{}': {} objects, {} (local refs {}, channel refs {}, in-flight copies "
                       "{}, unsealed {})",
                       o.owner, o.objects, FormatBytes(o.bytes), o.local_refs, o.channel_refs,
                       o.inflight_copies, o.unsealed);
  }
  return out;
}

std::string StoreStats::ToString() const {
  std::string out = fmt::format(
      "store '{}' (n{}.s{}, {} arena)\n"
      "  used {} of {} ({:.1f}%), high-water {}, {} live objects, {} copies in flight\n"
      "  free {} in {} blocks, largest {} (fragmentation {:.2f})\n"
      "  creates {}, frees {}, waited {}, timed out {}\n"
      "  holders: local {} refs on {} objects ({}), channel {} refs on {} objects ({}), "
      "in-flight {} copies on {} objects ({})\n",
      name, node_id, store_id, ArenaKindName(arena_kind), FormatBytes(bytes_used),
      FormatBytes(capacity),
      capacity == 0 ? 0.0 : 100.0 * static_cast<double>(bytes_used) / static_cast<double>(capacity),
      FormatBytes(high_water), live_objects, inflight_copies, FormatBytes(allocator.free_bytes),
      allocator.free_blocks, FormatBytes(allocator.largest_free_block),
      allocator.fragmentation(), creates, frees, create_waits, create_timeouts, local.refs,
      local.objects, FormatBytes(local.bytes), channel.refs, channel.objects,
      FormatBytes(channel.bytes), inflight.refs, inflight.objects, FormatBytes(inflight.bytes));
  for (const OwnerStats& o : owners) {
    out += fmt::format("  owner '{}': {} objects, {}, local refs {}, channel refs {}, in-flight "
                       "copies {}, unsealed {}\n",
                       o.owner, o.objects, FormatBytes(o.bytes), o.local_refs, o.channel_refs,
                       o.inflight_copies, o.unsealed);
  }
  return out;
}

}  // namespace tandem
