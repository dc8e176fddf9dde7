// Placement across nodes: see cluster_placement.h.
#include "runtime/cluster/cluster_placement.h"

#include <algorithm>
#include <numeric>
#include <map>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tandem::cluster {
namespace {

// The groups with replicas on one node, in job order: the request (replica count on this
// node) and the global index of each of its local replicas.
struct NodeLoad {
  std::vector<std::pair<size_t, std::vector<int>>> groups;  // (group index, global replicas)

  void Add(size_t g, int replica) {
    for (auto& [idx, reps] : groups) {
      if (idx == g) {
        reps.push_back(replica);
        return;
      }
    }
    groups.emplace_back(g, std::vector<int>{replica});
    std::sort(groups.begin(), groups.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
  }
};

// sched::Place on one node, then the local replica numbers mapped to global ones.
Result<sched::Placement> PlaceOnNode(const sched::NodeResources& node, const NodeLoad& load,
                                     const std::vector<sched::GroupRequest>& groups) {
  std::vector<sched::GroupRequest> reqs;
  for (const auto& [g, reps] : load.groups) {
    sched::GroupRequest r = groups[g];
    r.replicas = static_cast<int>(reps.size());
    reqs.push_back(std::move(r));
  }
  ASSIGN_OR_RETURN(sched::Placement p, sched::Place(node, reqs));
  size_t gi = 0, k = 0;
  for (sched::ReplicaAssignment& r : p.replicas) {
    while (groups[load.groups[gi].first].name != r.group) ++gi, k = 0;
    r.replica = load.groups[gi].second[k++];
  }
  return p;
}

Result<ClusterPlacement> PlaceAll(const std::vector<NodeLoad>& loads,
                                  const std::vector<sched::GroupRequest>& groups,
                                  const std::vector<sched::NodeResources>& nodes) {
  ClusterPlacement out;
  for (size_t k = 0; k < nodes.size(); ++k) {
    Result<sched::Placement> p = PlaceOnNode(nodes[k], loads[k], groups);
    if (!p.ok()) return p.status().WithContext(fmt::format("node {}", k));
    out.nodes.push_back(std::move(*p));
  }
  return out;
}

// The node of position `i` of `count` split over `n` nodes in contiguous blocks, earlier
// nodes taking the remainder.
size_t BlockNode(int i, int count, size_t n) {
  const int nn = static_cast<int>(n), base = count / nn, extra = count % nn;
  int end = 0;
  for (int k = 0; k < nn; ++k) {
    end += base + (k < extra ? 1 : 0);
    if (i < end) return static_cast<size_t>(k);
  }
  return n - 1;
}

// Contiguous blocks of each group's positions (by default its replica indices; for groups
// on a channel, their replicas' producer or consumer indices among all the channel's
// writers or readers, so producer p and consumer p land on one node).
// The nodes group g may run on: allowed[g], or all n.
std::vector<size_t> NodesFor(const AllowedNodes& allowed, size_t g, size_t n) {
  std::vector<size_t> out;
  if (g < allowed.size() && !allowed[g].empty()) {
    for (int k : allowed[g]) out.push_back(static_cast<size_t>(k));
  } else {
    for (size_t k = 0; k < n; ++k) out.push_back(k);
  }
  return out;
}

std::vector<NodeLoad> BlockSpread(const std::vector<sched::GroupRequest>& groups,
                                  const ReplicaPositions& positions, const AllowedNodes& allowed,
                                  size_t n) {
  std::vector<NodeLoad> loads(n);
  for (size_t g = 0; g < groups.size(); ++g) {
    const std::vector<size_t> on = NodesFor(allowed, g, n);
    for (int rep = 0; rep < groups[g].replicas; ++rep) {
      std::pair<int, int> at{rep, groups[g].replicas};
      if (g < positions.size() && rep < static_cast<int>(positions[g].size()))
        at = positions[g][static_cast<size_t>(rep)];
      loads[on[BlockNode(at.first, at.second, on.size())]].Add(g, rep);
    }
  }
  return loads;
}

// First fit, one replica at a time; a replica tries its pipeline partners' node first (the
// node of the same-numbered replica of a linked group placed earlier, else replica 0's).
Result<ClusterPlacement> FirstFit(const std::vector<sched::GroupRequest>& groups,
                                  const std::vector<std::vector<int>>& links,
                                  const std::vector<sched::NodeResources>& nodes,
                                  const AllowedNodes& allowed) {
  const size_t n = nodes.size();
  std::vector<NodeLoad> loads(n);
  std::map<std::pair<size_t, int>, size_t> where;  // (group, replica) -> node
  for (size_t g = 0; g < groups.size(); ++g) {
    for (int rep = 0; rep < groups[g].replicas; ++rep) {
      std::vector<size_t> order;
      for (int partner : links[g]) {
        for (int want : {rep, 0}) {
          auto it = where.find({static_cast<size_t>(partner), want});
          if (it != where.end() &&
              std::find(order.begin(), order.end(), it->second) == order.end())
            order.push_back(it->second);
        }
      }
      for (size_t k = 0; k < n; ++k)
        if (std::find(order.begin(), order.end(), k) == order.end()) order.push_back(k);
      const std::vector<size_t> on = NodesFor(allowed, g, n);
      std::erase_if(order, [&](size_t k) { return std::find(on.begin(), on.end(), k) == on.end(); });
      std::vector<std::string> why;
      bool placed = false;
      for (size_t k : order) {
        NodeLoad trial = loads[k];
        trial.Add(g, rep);
        Result<sched::Placement> p = PlaceOnNode(nodes[k], trial, groups);
        if (p.ok()) {
          loads[k] = std::move(trial);
          where[{g, rep}] = k;
          placed = true;
          break;
        }
        why.push_back(fmt::format("node {}: {}", k, p.status().message()));
      }
      if (!placed) {
        std::sort(why.begin(), why.end());
        return InvalidArgumentError(
            "the job does not fit on {} node(s): actors.{} replica {} fits on none of them "
            "(the replicas before it took what was left): {}",
            n, groups[g].name, rep, fmt::join(why, "; "));
      }
    }
  }
  return PlaceAll(loads, groups, nodes);
}

}  // namespace

int ClusterPlacement::NodeOf(std::string_view group, int replica) const {
  for (size_t k = 0; k < nodes.size(); ++k)
    for (const sched::ReplicaAssignment& r : nodes[k].replicas)
      if (r.group == group && r.replica == replica) return static_cast<int>(k);
  return -1;
}

std::vector<int> ClusterPlacement::ReplicasOn(int node, std::string_view group) const {
  std::vector<int> out;
  if (node < 0 || node >= static_cast<int>(nodes.size())) return out;
  for (const sched::ReplicaAssignment& r : nodes[node].replicas)
    if (r.group == group) out.push_back(r.replica);
  std::sort(out.begin(), out.end());
  return out;
}

std::string ClusterPlacement::ToString() const {
  std::string out;
  for (size_t k = 0; k < nodes.size(); ++k) {
    const std::string lines = nodes[k].ToString();
    if (lines.empty()) out += fmt::format("node {}: nothing\n", k);
    size_t start = 0;
    while (start < lines.size()) {
      const size_t end = lines.find('\n', start);
      out += fmt::format("node {}: {}\n", k, lines.substr(start, end - start));
      start = end == std::string::npos ? lines.size() : end + 1;
    }
  }
  return out;
}

Result<std::vector<sched::GroupRequest>> GroupRequestsOf(const JobSpec& job) {
  std::vector<sched::GroupRequest> out;
  for (const ActorGroupSpec& a : job.actors) {
    Result<sched::GroupRequest> r = sched::GroupRequestFromConfig(a.name, a.settings);
    if (!r.ok()) return r.status().WithContext(a.where);
    out.push_back(std::move(*r));
  }
  return out;
}

Result<ClusterPlacement> PlaceAcrossNodes(const std::vector<sched::GroupRequest>& groups,
                                          const std::vector<std::vector<int>>& links,
                                          const std::vector<sched::NodeResources>& nodes,
                                          const ReplicaPositions& positions,
                                          const AllowedNodes& allowed) {
  if (nodes.empty()) return InvalidArgumentError("placement across nodes: no nodes");
  if (links.size() != groups.size())
    return InternalError("placement across nodes: {} link lists for {} groups", links.size(),
                         groups.size());
  for (size_t g = 0; g < allowed.size() && g < groups.size(); ++g)
    for (int k : allowed[g])
      if (k < 0 || k >= static_cast<int>(nodes.size()))
        return InvalidArgumentError("actors.{}.nodes: node {} is not one of the cluster's {} "
                                    "nodes (ranks 0..{})", groups[g].name, k, nodes.size(),
                                    nodes.size() - 1);
  Result<ClusterPlacement> spread =
      PlaceAll(BlockSpread(groups, positions, allowed, nodes.size()), groups, nodes);
  if (spread.ok()) return spread;
  return FirstFit(groups, links, nodes, allowed);
}

Result<ClusterPlacement> PlaceAcrossNodes(const JobSpec& job,
                                          const std::vector<sched::NodeResources>& nodes) {
  ASSIGN_OR_RETURN(std::vector<sched::GroupRequest> groups, GroupRequestsOf(job));
  // Groups joined by a channel: one's `out` is another's `in`.
  std::vector<std::vector<int>> links(groups.size());
  auto port = [](const ActorGroupSpec& a, const char* name) -> std::string {
    const ConfigValue* v = a.settings.Find(name);
    if (v == nullptr) return "";
    Result<std::string> s = v->AsString();
    return s.ok() ? *s : "";
  };
  for (size_t i = 0; i < job.actors.size(); ++i) {
    const std::string out = port(job.actors[i], "out");
    if (out.empty()) continue;
    for (size_t j = 0; j < job.actors.size(); ++j) {
      if (j != i && port(job.actors[j], "in") == out) {
        links[i].push_back(static_cast<int>(j));
        links[j].push_back(static_cast<int>(i));
      }
    }
  }
  // Channel positions: a writer's producer index among all of its channel's writers, else a
  // reader's consumer index among its readers (route = "replica" pairs producer p with
  // consumer p when the counts match, so blocks of equal positions keep lanes on one node).
  ReplicaPositions positions(groups.size());
  for (size_t i = 0; i < job.actors.size(); ++i) {
    const ActorGroupSpec& a = job.actors[i];
    const std::string out = port(a, "out"), in = port(a, "in");
    const std::string side = !out.empty() ? "out" : !in.empty() ? "in" : "";
    if (side.empty()) continue;
    const std::string& ch = side == "out" ? out : in;
    const int count = job.PortReplicas(side, ch);
    for (int r = 0; r < static_cast<int>(a.replicas); ++r)
      positions[i].push_back({job.PortIndex(side, ch, a.name, r), count});
  }
  // Pins: the groups' `nodes` keys, ascending and without repeats.
  AllowedNodes allowed(groups.size());
  for (size_t i = 0; i < job.actors.size(); ++i) {
    const ConfigValue* v = job.actors[i].settings.Find("nodes");
    if (v == nullptr || !v->is_array()) continue;
    for (const ConfigValue& e : v->array()) {
      ASSIGN_OR_RETURN(int64_t k, e.AsInt());
      allowed[i].push_back(static_cast<int>(k));
    }
    std::sort(allowed[i].begin(), allowed[i].end());
    allowed[i].erase(std::unique(allowed[i].begin(), allowed[i].end()), allowed[i].end());
  }
  return PlaceAcrossNodes(groups, links, nodes, positions, allowed);
}

}  // namespace tandem::cluster
