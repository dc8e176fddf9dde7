// Prometheus text exposition (format 0.0.4) of job statuses, served at GET /metrics when the
// daemon or `tandem run` is given a metrics port: actor states and restarts, channel depths
// and waits, store bytes and objects, per-stage timings, throughput. In a job on several
// nodes every sample carries the node's rank as label `node`, and the head also serves each
// node's heartbeat age.
// Thread-safety: a pure function.
#pragma once

#include <string>
#include <vector>

#include "runtime/job/job_status.h"

namespace tandem {

std::string FormatPrometheus(const std::vector<JobStatus>& jobs);

}  // namespace tandem
