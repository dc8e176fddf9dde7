// ChannelRegistry: the named channels of one job.
//
// The job loader declares each `[channels.NAME]` section (capacity, min_ready, route, and
// the numbers of producer and consumer replicas) before it knows what the channel will
// carry; the first actor that opens the channel with a type creates it, and every later
// Open must ask for the same type. The registry keeps channels alive for the job's lifetime
// and gives `tandem status` a stats snapshot of all of them.
//
//   RETURN_IF_ERROR(registry.Declare("hidden", {.capacity = 60, .min_ready = 1}));
//   ASSIGN_OR_RETURN(auto ch, registry.Open<HiddenBatch>("hidden"));
//   RETURN_IF_ERROR(ch->PushFrom(replica, std::move(batch)));   // route = "replica"
//
// The runner calls FinishProducer when a writer replica returns and Close when all have.
//
// Thread-safety: all methods are safe from any thread.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include "runtime/channel/channel.h"
#include "runtime/channel/channel_base.h"
#include "runtime/core/status.h"
#include "runtime/core/thread_annotations.h"

namespace tandem {

class ChannelRegistry {
 public:
  // Declares a channel. InvalidArgument if the name is taken or the options are invalid.
  Status Declare(std::string name, ChannelOptions options) EXCLUDES(mu_);

  // The channel `name` with items of type T, created on first open.
  // NotFound (listing the declared names) if it was never declared; InvalidArgument if it
  // was opened before with another item type.
  template <class T>
  Result<std::shared_ptr<Channel<T>>> Open(std::string_view name) EXCLUDES(mu_) {
    std::lock_guard lock(mu_);
    auto it = entries_.find(name);
    if (it == entries_.end()) return NotFoundLocked(name);
    Entry& e = it->second;
    if (!e.channel) {
      ASSIGN_OR_RETURN(std::shared_ptr<Channel<T>> ch, Channel<T>::Create(it->first, e.options));
      for (int p : e.finished_producers) RETURN_IF_ERROR(ch->FinishProducer(p));
      if (e.closed) ch->Close();
      e.channel = ch;
      return ch;
    }
    if (e.channel->item_type() != typeid(T)) return TypeMismatch(*e.channel, typeid(T));
    return std::static_pointer_cast<Channel<T>>(e.channel);
  }

  // Declare + Open in one call.
  template <class T>
  Result<std::shared_ptr<Channel<T>>> Create(std::string name, ChannelOptions options) {
    const std::string key = name;
    RETURN_IF_ERROR(Declare(std::move(name), options));
    return Open<T>(key);
  }

  // Stats of every declared channel, in name order (unopened ones show depth 0, no type).
  std::vector<ChannelStats> Snapshot() const EXCLUDES(mu_);
  // Declared names, in order.
  std::vector<std::string> Names() const EXCLUDES(mu_);
  // Closes channel `name` (also if it is opened later): its writers are done.
  Status Close(std::string_view name) EXCLUDES(mu_);
  // Closes every channel, including ones opened later (job shutdown).
  void CloseAll() EXCLUDES(mu_);
  // Producer replica `producer` of channel `name` is done (also if the channel is opened
  // later); see Channel<T>::FinishProducer. NotFound for an undeclared channel,
  // InvalidArgument for an index out of range.
  Status FinishProducer(std::string_view name, int producer) EXCLUDES(mu_);

 private:
  struct Entry {
    ChannelOptions options;
    std::shared_ptr<ChannelBase> channel;  // null until first Open
    bool closed = false;
    std::vector<int> finished_producers;  // FinishProducer calls before the first Open
  };

  Status NotFoundLocked(std::string_view name) const REQUIRES(mu_);
  static Status TypeMismatch(const ChannelBase& channel, const std::type_info& asked);

  mutable std::mutex mu_;
  std::map<std::string, Entry, std::less<>> entries_ GUARDED_BY(mu_);
};

}  // namespace tandem
