#include "runtime/channel/channel_registry.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tandem {

Status ChannelRegistry::Declare(std::string name, ChannelOptions options) {
  if (name.empty()) return InvalidArgumentError("channel name must not be empty");
  RETURN_IF_ERROR(ValidateChannelOptions(name, options));
  std::lock_guard lock(mu_);
  if (entries_.count(name) > 0) {
    return InvalidArgumentError("channel '{}' is declared twice; channel names must be unique",
                                name);
  }
  entries_.emplace(std::move(name), Entry{options, nullptr, false, {}});
  return Status::Ok();
}

std::vector<ChannelStats> ChannelRegistry::Snapshot() const {
  std::vector<std::shared_ptr<ChannelBase>> open;
  std::vector<ChannelStats> out;
  {
    std::lock_guard lock(mu_);
    out.reserve(entries_.size());
    for (const auto& [name, e] : entries_) {
      ChannelStats s;
      s.name = name;
      s.capacity = e.options.capacity;
      s.min_ready = e.options.min_ready;
      s.closed = e.closed;
      out.push_back(std::move(s));
      open.push_back(e.channel);
    }
  }
  // Channel stats take the channel's lock; gather them outside ours.
  for (size_t i = 0; i < out.size(); ++i) {
    if (open[i]) out[i] = open[i]->Stats();
  }
  return out;
}

std::vector<std::string> ChannelRegistry::Names() const {
  std::lock_guard lock(mu_);
  std::vector<std::string> names;
  for (const auto& [name, e] : entries_) names.push_back(name);
  return names;
}

void ChannelRegistry::CloseAll() {
  std::vector<std::shared_ptr<ChannelBase>> open;
  {
    std::lock_guard lock(mu_);
    for (auto& [name, e] : entries_) {
      e.closed = true;
      if (e.channel) open.push_back(e.channel);
    }
  }
  for (auto& ch : open) ch->Close();
}

Status ChannelRegistry::Close(std::string_view name) {
  std::shared_ptr<ChannelBase> channel;
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(name);
    if (it == entries_.end()) return NotFoundLocked(name);
    it->second.closed = true;
    channel = it->second.channel;
  }
  if (channel) channel->Close();
  return Status::Ok();
}

Status ChannelRegistry::FinishProducer(std::string_view name, int producer) {
  std::shared_ptr<ChannelBase> channel;
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(name);
    if (it == entries_.end()) return NotFoundLocked(name);
    Entry& e = it->second;
    if (producer < 0 || producer >= e.options.producers) {
      return InvalidArgumentError("channel '{}': producer {} is out of range [0, {})", name,
                                  producer, e.options.producers);
    }
    if (!e.channel) {
      e.finished_producers.push_back(producer);
      return Status::Ok();
    }
    channel = e.channel;
  }
  return channel->FinishProducer(producer);
}

Status ChannelRegistry::NotFoundLocked(std::string_view name) const {
  std::vector<std::string_view> names;
  for (const auto& [n, e] : entries_) names.push_back(n);
  return NotFoundError("channel '{}' is not declared (declared: [{}]); add a [channels.{}] "
                       "section to the job file",
                       name, fmt::join(names, ", "), name);
}

Status ChannelRegistry::TypeMismatch(const ChannelBase& channel, const std::type_info& asked) {
  return InvalidArgumentError("channel '{}' carries {}, but was opened as a channel of {}",
                              channel.name(), DemangledTypeName(channel.item_type()),
                              DemangledTypeName(asked));
}

}  // namespace tandem
