// Channel links across nodes: see channel_links.h.
#include "runtime/cluster/channel_links.h"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tandem::cluster {
namespace {

struct End {
  std::string group;
  int replica = 0;
  int node = -1;
};

// A channel's writers and readers in port-index order, with their nodes.
void EndsOf(const JobSpec& job, const ClusterPlacement& placement, const std::string& channel,
            std::vector<End>* writers, std::vector<End>* readers) {
  for (const ActorGroupSpec& a : job.actors) {
    for (const char* side : {"out", "in"}) {
      Result<std::string> v = a.settings.GetString(side, "");
      if (!v.ok() || *v != channel) continue;
      for (int r = 0; r < static_cast<int>(a.replicas); ++r)
        (std::string(side) == "out" ? writers : readers)
            ->push_back({a.name, r, placement.NodeOf(a.name, r)});
    }
  }
}

Status CheckAnyRouteLocal(const JobSpec& job, const ChannelSpec& ch, const std::vector<End>& w,
                          const std::vector<End>& r) {
  std::set<int> wn, rn;
  for (const End& e : w) wn.insert(e.node);
  for (const End& e : r) rn.insert(e.node);
  if (wn == rn) return Status::Ok();
  return InvalidArgumentError(
      "{}: channel '{}': its writers run on nodes {} and its readers on nodes {}; a channel "
      "with route = \"any\" cannot cross nodes (which reader takes an item is a race), so "
      "every node needs both, or use route = \"replica\" (docs/scaling.md)",
      job.path, ch.name, fmt::join(wn, ","), fmt::join(rn, ","));
}

}  // namespace

std::string ChannelLink::Name() const {
  return fmt::format("{} consumer {} (node {} -> node {})", channel, consumer, from_node, to_node);
}

Result<NodeChannelPlan> PlanChannelLinks(const JobSpec& job, const ClusterPlacement& placement,
                                         int node) {
  NodeChannelPlan plan;
  for (const ChannelSpec& ch : job.channels) {
    std::vector<End> w, r;
    EndsOf(job, placement, ch.name, &w, &r);
    if (w.empty() || r.empty()) continue;
    if (ch.route != "replica") {
      RETURN_IF_ERROR(CheckAnyRouteLocal(job, ch, w, r));
      continue;
    }
    const int P = static_cast<int>(w.size()), C = static_cast<int>(r.size());
    const int g = std::gcd(P, C);
    auto feeds = [g](int p, int c) { return (c - p) % g == 0; };
    auto name = [&](const std::vector<End>& v, int i) {
      return fmt::format("{}/{} on node {}", v[i].group, v[i].replica, v[i].node);
    };
    for (int p = 0; p < P; ++p) {
      // A producer's items for consumers on one other node travel on one link per consumer:
      // two such links would interleave them.
      std::map<int, int> fed_on;  // node -> a consumer p feeds there
      for (int c = p % g; c < C; c += g) {
        if (r[c].node == w[p].node) continue;
        auto [it, fresh] = fed_on.emplace(r[c].node, c);
        if (!fresh)
          return InvalidArgumentError(
              "{}: channel '{}': {} feeds {} and {} on another node; a producer may feed at "
              "most one consumer per other node (docs/scaling.md)",
              job.path, ch.name, name(w, p), name(r, it->second), name(r, c));
      }
    }
    // Links: per consumer, one from each other node that runs producers feeding it.
    std::vector<ChannelLink> links;
    for (int c = 0; c < C; ++c) {
      std::map<int, std::vector<int>> from;  // node -> its producers feeding c
      for (int p = c % g; p < P; p += g)
        if (w[p].node != r[c].node) from[w[p].node].push_back(p);
      for (auto& [k, ps] : from)
        links.push_back({ch.name, c, k, r[c].node, std::move(ps)});
    }
    for (const ChannelLink& in : links) {
      for (const ChannelLink& out : links) {
        if (out.from_node != in.to_node) continue;
        for (int p : in.producers) {
          if (feeds(p, out.consumer))
            return InvalidArgumentError(
                "{}: channel '{}': node {} receives {}'s items for {} and also sends to {}, "
                "which that producer feeds too; run the producer's consumers on its own node "
                "or on nodes that send nothing on this channel (docs/scaling.md)",
                job.path, ch.name, in.to_node, name(w, p), name(r, in.consumer),
                name(r, out.consumer));
        }
      }
    }
    for (ChannelLink& l : links) {
      if (l.to_node == node) {
        plan.fed_from_other_nodes.insert(ch.name);
        plan.incoming.push_back(l);
      }
      if (l.from_node == node) plan.outgoing.push_back(l);
    }
    for (int p = 0; p < P; ++p) {
      if (w[p].node == node) continue;
      bool feeds_here = false;
      for (int c = p % g; c < C; c += g) feeds_here = feeds_here || r[c].node == node;
      if (!feeds_here) plan.finished_here[ch.name].push_back(p);
    }
  }
  return plan;
}

Status CheckChannelLinks(const JobSpec& job, const ClusterPlacement& placement) {
  for (int k = 0; k < static_cast<int>(placement.nodes.size()); ++k)
    RETURN_IF_ERROR(PlanChannelLinks(job, placement, k).status());
  return Status::Ok();
}

}  // namespace tandem::cluster
