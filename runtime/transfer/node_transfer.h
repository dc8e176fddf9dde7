// NodeTransfer: one node's object links for a job that spans several nodes.
//
// From the node's channel plan (runtime/cluster/channel_links.h) it
// * marks finished, in this node's copy of each channel, the producers that run elsewhere and
//   feed nothing here;
// * when links come to this node: listens (LinkListener) and publishes its address under
//   "transfer/NODE" in the head's key-value service;
// * for each link that leaves this node: waits for the receiver's address, connects
//   (LinkSender) and forwards the consumer's items; when the receiver says the consumer is
//   gone, closes this node's copy of the channel (a finished consumer ends the channel, as in
//   one process).
// Every node listens and publishes before it waits for another's address, so starting the
// nodes in any order cannot deadlock. Node-local lanes keep the store's zero-copy path: only
// a consumer on another node has a link.
//
// Thread-safety: Start and Stop from one thread; the failure callback runs on a link's
// thread (once per link at most).
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "runtime/channel/channel_registry.h"
#include "runtime/cluster/channel_links.h"
#include "runtime/cluster/cluster_node.h"
#include "runtime/core/status.h"
#include "runtime/job/job_spec.h"
#include "runtime/store/object_store.h"
#include "runtime/transfer/link.h"
#include "runtime/transfer/wire_port.h"

namespace tandem::transfer {

struct NodeTransferOptions {
  int node = 0;              // this node's rank
  std::string listen_host;   // an IPv4 address to listen on ("127.0.0.1", "0.0.0.0")
  std::string address;       // how other nodes reach this one (published with the port)
  LinkOptions link;          // the token and the links' limits
  Duration address_timeout = std::chrono::minutes(5);  // a receiver's address must appear
};

class NodeTransfer {
 public:
  // See the header comment. Errors: a channel with no registered wire item type, a listen
  // or connect failure, a receiver's refusal, or an address that never appeared (naming
  // the link). `kv` and everything passed by reference must outlive the transfer.
  static Result<std::unique_ptr<NodeTransfer>> Start(const JobSpec& job,
                                                     const cluster::NodeChannelPlan& plan,
                                                     ChannelRegistry& channels, ObjectStore& store,
                                                     const WireChannels& wire,
                                                     cluster::ClusterNode& kv,
                                                     NodeTransferOptions options,
                                                     LinkFailureFn on_failure);
  ~NodeTransfer();  // Stop()
  NodeTransfer(const NodeTransfer&) = delete;
  NodeTransfer& operator=(const NodeTransfer&) = delete;

  // Ends the links: tells the senders of incoming links that this node's consumers are gone,
  // then lets each outgoing link finish its stream while the receiver makes progress.
  void Stop();

  // "object links: 2 out, 0 in".
  std::string Describe() const;

 private:
  NodeTransfer() = default;
  std::map<std::string, std::unique_ptr<WirePort>> ports_;  // by channel
  std::unique_ptr<LinkListener> listener_;
  std::vector<std::unique_ptr<LinkSender>> senders_;
  size_t incoming_ = 0;
};

// "host:port" split at the last colon. InvalidArgument naming `what` when malformed.
Result<std::pair<std::string, int>> SplitHostPort(const std::string& s, const std::string& what);

}  // namespace tandem::transfer
