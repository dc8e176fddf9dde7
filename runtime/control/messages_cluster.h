// The cluster messages' Cap'n Proto codec (ClusterRequest, ClusterReply of messages.h),
// internal to runtime/control: messages.cc frames them with the rest of the control
// protocol. Put* fills a builder from the struct, Get* reads a reader back into one; a round
// trip gives back equal structs (messages_test.cc).
// Thread-safety: stateless functions.
#pragma once

#include "runtime/control/control.capnp.h"
#include "runtime/control/messages.h"

namespace tandem::control_wire {

void PutCluster(const ClusterRequest& c, wire::ClusterRequest::Builder b);
ClusterRequest GetCluster(wire::ClusterRequest::Reader r);
void PutClusterReply(const ClusterReply& c, wire::ClusterReply::Builder b);
ClusterReply GetClusterReply(wire::ClusterReply::Reader r);

}  // namespace tandem::control_wire
