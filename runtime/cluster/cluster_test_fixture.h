// A cluster head on a free port of 127.0.0.1 and the options of its nodes, for the tests
// that run a head and its nodes in one process (each node places two "worker" replicas).
// Test-only. Thread-safety: built and read by the test's thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/cluster/cluster_head.h"
#include "runtime/cluster/cluster_node.h"

namespace tandem::cluster {

constexpr char kTestToken[] = "cluster-test-token";

struct HeadFixture {
  explicit HeadFixture(int nodes) : n(nodes) {
    HeadOptions o;
    o.nodes = nodes;
    o.job_hash = "hash-a";
    o.version = "v1";
    o.place = [](const std::vector<sched::NodeResources>& inv) {
      return PlaceAcrossNodes({{"worker", static_cast<int>(inv.size()) * 2, 0, 1, 0}},
                              {{}}, inv);
    };
    HeadListen l;
    l.token = kTestToken;
    auto h = ClusterHead::Start(std::move(o), l);
    EXPECT_TRUE(h.ok()) << h.status().ToString();
    head = std::move(*h);
  }

  NodeOptions Options(int rank) const {
    NodeOptions o;
    o.place.node_rank = rank;
    o.place.nodes = n;
    o.place.head_port = head->port();
    o.token = kTestToken;
    o.host = "host" + std::to_string(rank);
    o.job_hash = "hash-a";
    o.version = "v1";
    o.inventory = sched::FakeResources(0, 4);
    o.heartbeat_interval = std::chrono::milliseconds(50);
    o.poll = std::chrono::milliseconds(200);
    return o;
  }

  int n;
  std::unique_ptr<ClusterHead> head;
};

}  // namespace tandem::cluster
