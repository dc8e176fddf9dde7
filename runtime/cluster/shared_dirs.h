// CheckSharedDirs: the directories a job writes for every node (its checkpoints: the
// `exclusive_dir` keys, runtime/job/job_spec_keys.h) must be one directory that every node
// sees, a shared filesystem. Checkpoints are written once, by the node that runs the
// writing group's replica 0, and every node reads them on resume (the drafters' weights,
// the targets' data positions); nodes that saw different directories under the same path
// would silently split the run.
//
// For each such directory the writing node creates it, writes a file holding a fresh random
// nonce (kSharedDirCheckFile) and publishes the nonce through the head's key-value service;
// every other node reads the file at the same path and compares. All nodes then meet on a
// barrier and the writer removes the file. A node that finds no file, or another nonce,
// fails with InvalidArgument naming itself, the key and the path: the caller reports it to
// the cluster (ClusterSession::Finish), so every node stops naming it.
//
// Thread-safety: a function; call it once per node, after joining and before the job starts.
#pragma once

#include <string>

#include "runtime/cluster/cluster_node.h"
#include "runtime/cluster/cluster_placement.h"
#include "runtime/core/clock.h"
#include "runtime/core/status.h"
#include "runtime/job/job_spec.h"

namespace tandem::cluster {

inline constexpr const char* kSharedDirCheckFile = ".tandem-shared-dir-check";

// `placement` is the joined cluster's; `timeout` bounds each wait for another node.
Status CheckSharedDirs(ClusterNode& node, const JobSpec& job, const ClusterPlacement& placement,
                       Duration timeout);

}  // namespace tandem::cluster
