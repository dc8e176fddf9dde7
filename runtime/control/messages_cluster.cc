// The cluster messages' Cap'n Proto codec (messages_cluster.h).
#include "runtime/control/messages_cluster.h"

#include <utility>

namespace tandem::control_wire {

void PutCluster(const ClusterRequest& c, wire::ClusterRequest::Builder b) {
  b.setNodeRank(c.node_rank);
  b.setHost(c.host);
  b.setNonce(c.nonce);
  b.setJobHash(c.job_hash);
  b.setVersion(c.version);
  auto inv = b.initInventory();
  auto gpus = inv.initGpus(static_cast<unsigned>(c.inventory.gpus.size()));
  for (size_t i = 0; i < c.inventory.gpus.size(); ++i) {
    const sched::GpuInfo& g = c.inventory.gpus[i];
    gpus[i].setIndex(g.index);
    gpus[i].setName(g.name);
    gpus[i].setMemoryBytes(g.memory_bytes);
    gpus[i].setFake(g.fake);
    gpus[i].setComputeCapability(g.compute_capability);
  }
  inv.setCpuSlots(c.inventory.cpu_slots);
  inv.setPinnedBytes(c.inventory.pinned_bytes);
  b.setStep(c.step);
  b.setFailure(c.failure);
  b.setKey(c.key);
  b.setValue(kj::arrayPtr(reinterpret_cast<const kj::byte*>(c.value.data()), c.value.size()));
  b.setCount(c.count);
  b.setWaitMs(c.wait_ms);
}

ClusterRequest GetCluster(wire::ClusterRequest::Reader r) {
  ClusterRequest c;
  c.node_rank = r.getNodeRank();
  c.host = r.getHost();
  c.nonce = r.getNonce();
  c.job_hash = r.getJobHash();
  c.version = r.getVersion();
  auto inv = r.getInventory();
  for (auto g : inv.getGpus()) {
    c.inventory.gpus.push_back({g.getIndex(), g.getName(), g.getMemoryBytes(), g.getFake(),
                                g.getComputeCapability()});
  }
  c.inventory.cpu_slots = inv.getCpuSlots();
  c.inventory.pinned_bytes = inv.getPinnedBytes();
  c.step = r.getStep();
  c.failure = r.getFailure();
  c.key = r.getKey();
  auto v = r.getValue();
  c.value.assign(reinterpret_cast<const char*>(v.begin()), v.size());
  c.count = r.getCount();
  c.wait_ms = r.getWaitMs();
  return c;
}

void PutClusterReply(const ClusterReply& c, wire::ClusterReply::Builder b) {
  b.setReady(c.ready);
  b.setValue(kj::arrayPtr(reinterpret_cast<const kj::byte*>(c.value.data()), c.value.size()));
  b.setFailure(c.failure);
  auto nodes = b.initPlacement(static_cast<unsigned>(c.placement.size()));
  for (size_t k = 0; k < c.placement.size(); ++k) {
    const auto& reps = c.placement[k].replicas;
    auto list = nodes[k].initReplicas(static_cast<unsigned>(reps.size()));
    for (size_t i = 0; i < reps.size(); ++i) {
      list[i].setGroup(reps[i].group);
      list[i].setReplica(reps[i].replica);
      auto gpus = list[i].initGpus(static_cast<unsigned>(reps[i].gpus.size()));
      for (size_t g = 0; g < reps[i].gpus.size(); ++g)
        gpus.set(static_cast<unsigned>(g), reps[i].gpus[g]);
      list[i].setGpuShare(reps[i].gpu_share);
      list[i].setCpus(reps[i].cpus);
      list[i].setPinnedBytes(reps[i].pinned_bytes);
    }
  }
  auto hosts = b.initHosts(static_cast<unsigned>(c.hosts.size()));
  for (size_t i = 0; i < c.hosts.size(); ++i) hosts.set(static_cast<unsigned>(i), c.hosts[i]);
}

ClusterReply GetClusterReply(wire::ClusterReply::Reader r) {
  ClusterReply c;
  c.ready = r.getReady();
  auto v = r.getValue();
  c.value.assign(reinterpret_cast<const char*>(v.begin()), v.size());
  c.failure = r.getFailure();
  for (auto node : r.getPlacement()) {
    sched::Placement p;
    for (auto rep : node.getReplicas()) {
      sched::ReplicaAssignment a;
      a.group = rep.getGroup();
      a.replica = rep.getReplica();
      for (int32_t g : rep.getGpus()) a.gpus.push_back(g);
      a.gpu_share = rep.getGpuShare();
      a.cpus = rep.getCpus();
      a.pinned_bytes = rep.getPinnedBytes();
      p.replicas.push_back(std::move(a));
    }
    c.placement.push_back(std::move(p));
  }
  for (auto h : r.getHosts()) c.hosts.emplace_back(h);
  return c;
}

}  // namespace tandem::control_wire
