// NodeTransfer: see node_transfer.h.
#include "runtime/transfer/node_transfer.h"

#include <algorithm>
#include <charconv>
#include <mutex>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "runtime/core/logging.h"

namespace tandem::transfer {
namespace {

std::string AddressKey(int node) { return fmt::format("transfer/{}", node); }

// Consumer c's share of a channel's capacity: the most items the receiver holds for it, and
// so the most a link keeps unacknowledged.
size_t Share(const JobSpec& job, const std::string& channel, int consumer) {
  const ChannelSpec* cs = job.FindChannel(channel);
  const size_t cap = cs != nullptr ? static_cast<size_t>(cs->capacity) : 1;
  const size_t n = static_cast<size_t>(std::max(job.PortReplicas("in", channel), 1));
  return std::max<size_t>(1, cap / n + (static_cast<size_t>(consumer) < cap % n ? 1 : 0));
}

}  // namespace

Result<std::pair<std::string, int>> SplitHostPort(const std::string& s, const std::string& what) {
  const size_t colon = s.rfind(':');
  int port = 0;
  if (colon == std::string::npos || colon == 0) {
    return InvalidArgumentError("{}: '{}' is not HOST:PORT", what, s);
  }
  const char* b = s.data() + colon + 1;
  const char* e = s.data() + s.size();
  auto [end, ec] = std::from_chars(b, e, port);
  if (ec != std::errc() || end != e || port <= 0 || port > 65535)
    return InvalidArgumentError("{}: '{}' is not HOST:PORT", what, s);
  return std::make_pair(s.substr(0, colon), port);
}

Result<std::unique_ptr<NodeTransfer>> NodeTransfer::Start(
    const JobSpec& job, const cluster::NodeChannelPlan& plan, ChannelRegistry& channels,
    ObjectStore& store, const WireChannels& wire, cluster::ClusterNode& kv,
    NodeTransferOptions o, LinkFailureFn on_failure) {
  std::unique_ptr<NodeTransfer> t(new NodeTransfer());
  for (const auto& [ch, producers] : plan.finished_here)
    for (int p : producers) RETURN_IF_ERROR(channels.FinishProducer(ch, p));
  for (const auto* links : {&plan.incoming, &plan.outgoing}) {
    for (const cluster::ChannelLink& l : *links) {
      if (t->ports_.contains(l.channel)) continue;
      ASSIGN_OR_RETURN(t->ports_[l.channel], wire.Open(l.channel, channels));
    }
  }
  if (!plan.incoming.empty()) {
    // Each expected link connects once.
    auto expected = std::make_shared<std::vector<cluster::ChannelLink>>(plan.incoming);
    auto taken = std::make_shared<std::set<size_t>>();
    auto mu = std::make_shared<std::mutex>();
    NodeTransfer* self = t.get();
    LinkListener::ResolveFn resolve =
        [self, expected, taken, mu](const LinkHello& h) -> Result<LinkListener::Inbound> {
      std::lock_guard lock(*mu);
      for (size_t i = 0; i < expected->size(); ++i) {
        const cluster::ChannelLink& l = (*expected)[i];
        if (l.channel != h.channel || l.consumer != h.consumer || l.from_node != h.from_node)
          continue;
        if (!taken->insert(i).second)
          return InvalidArgumentError("object link {} is already connected", l.Name());
        return LinkListener::Inbound{self->ports_.at(l.channel).get(), l.producers, l.Name()};
      }
      return InvalidArgumentError("node {} expects no object link for {} consumer {} from "
                                  "node {}", expected->front().to_node, h.channel, h.consumer,
                                  h.from_node);
    };
    ASSIGN_OR_RETURN(t->listener_, LinkListener::Start(o.listen_host, 0, o.link, &store,
                                                       std::move(resolve), on_failure));
    t->incoming_ = plan.incoming.size();
    RETURN_IF_ERROR(kv.KvPut(AddressKey(o.node),
                             fmt::format("{}:{}", o.address, t->listener_->port())));
  }
  for (const cluster::ChannelLink& l : plan.outgoing) {
    Result<std::string> addr = kv.KvGet(AddressKey(l.to_node), o.address_timeout);
    if (!addr.ok())
      return addr.status().WithContext(fmt::format("object link {}: node {}'s address",
                                                   l.Name(), l.to_node));
    ASSIGN_OR_RETURN(auto hp, SplitHostPort(*addr, AddressKey(l.to_node)));
    LinkHello hello{l.channel, l.consumer, o.node};
    ASSIGN_OR_RETURN(std::unique_ptr<LinkSender> s,
                     LinkSender::Connect(hp.first, hp.second, hello, o.link,
                                         fmt::format("node {}", l.to_node), on_failure));
    const std::string ch = l.channel;
    s->Start(t->ports_.at(l.channel).get(), l.consumer, l.producers,
             Share(job, l.channel, l.consumer), [&channels, ch] {
               TLOG_DEBUG("channel '{}': a consumer on another node finished: closing it", ch);
               (void)channels.Close(ch);
             });
    t->senders_.push_back(std::move(s));
  }
  TLOG_INFO("node {}: {}", o.node, t->Describe());
  return t;
}

NodeTransfer::~NodeTransfer() { Stop(); }

void NodeTransfer::Stop() {
  if (listener_) listener_->Stop();
  for (auto& s : senders_) s->Stop();
}

std::string NodeTransfer::Describe() const {
  return fmt::format("object links: {} out, {} in", senders_.size(), incoming_);
}

}  // namespace tandem::transfer
