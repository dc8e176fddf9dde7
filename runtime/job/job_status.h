// JobStatus: a point-in-time picture of one job for `tandem status`, `tandem list`, the
// metrics endpoint and the progress line: its actors, channels, object store, per-stage
// timings, throughput and a one-line verdict on the bottleneck. Plain values (no Cap'n Proto
// here; messages.h converts them), rendered as text or JSON.
// Thread-safety: value types and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tandem {

struct ActorStatus {
  std::string name;        // "consumer/1"
  std::string class_name;  // "demo.consumer"
  std::string group;       // "consumer"
  int replica = 0;
  int gpu = -1;            // -1: a CPU actor
  std::string state;       // created, running, restarting, failed, stopped, ...
  int restarts = 0;
  int max_restarts = 0;
  uint64_t mailbox_depth = 0;
  uint64_t messages_done = 0;
  std::string stage;       // what the actor is doing now (Actor::SetStage)
  std::string last_error;  // "" when none
};

struct ChannelStatus {
  std::string name;
  uint64_t depth = 0;
  uint64_t capacity = 0;
  uint64_t min_ready = 0;
  uint64_t max_depth = 0;
  uint64_t pushed = 0;
  uint64_t popped = 0;
  bool closed = false;
  double push_wait_s = 0;  // cumulative time producers spent blocked
  double pop_wait_s = 0;   // cumulative time consumers spent blocked
  int writers = 0;         // replicas with out = this channel
  int readers = 0;         // replicas with in = this channel
};

struct StoreStatus {
  uint64_t capacity = 0;
  uint64_t used = 0;
  uint64_t high_water = 0;
  uint64_t objects = 0;
  uint64_t inflight_copies = 0;
  uint64_t local_refs = 0;
  uint64_t channel_refs = 0;
  std::string holders;     // StoreStats::HoldersSummary()
};

struct StageStatus {
  std::string name;
  uint64_t count = 0;
  double total_s = 0;
  double mean_ms = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  double percent_of_wall = 0;
};

// A DFlash2 drafter's candidate selector at a log step (docs/dflash2.md): its loss (before
// the selector_loss_weight), candidate recall (loss rows whose target is among the top-k
// candidates) and selector accuracy (covered rows where the selector ranks the target first).
// Inactive for DFlash drafters, which have no selector.
struct SelectorMetrics {
  bool active = false;
  double loss = 0;
  double recall = 0;
  double accuracy = 0;
};

// Training progress as the job's actors publish it (runtime/job/job_metrics.h).
// The last evaluation by speculative decoding (a drafter's `eval` table,
// actors/dflash/drafter_eval.h): real acceptance, not the training estimate.
struct EvalStatus {
  bool active = false;              // an evaluation finished in this job
  int64_t step = 0;                 // the training step it measured
  double tau = 0;                   // mean accepted drafts + 1 (the bonus) per verify step
  double tok_s = 0;                 // generated tokens per second while decoding
  int64_t prompts = 0;              // prompts decoded
  std::vector<double> accept_rate;  // [j - 1]: share of verify steps that accepted draft j
  int64_t best_step = -1;           // the step of the highest tau so far (-1: none)
  double best_tau = 0;
};

struct TrainingStatus {
  bool active = false;       // some actor publishes steps; false for job kinds without them
  int64_t step = 0;          // the slowest actor's step
  int64_t total_steps = 0;   // its max_steps (0: unknown)
  double steps_per_s = 0;    // since the first step this process saw
  bool has_metrics = false;  // loss/acc/tau/tok_s below were read at least once
  int64_t metrics_step = 0;  // the step they were read at
  double loss = 0;
  double acc = 0;
  double tau = 0;
  double tok_s = 0;
  EvalStatus eval;
  SelectorMetrics selector;  // the mean over the replicas that have a selector
};

// One node of a job that spans several tandem processes (runtime/cluster), as the cluster's
// head sees it: its health from the heartbeats, and its actors, channels and store as the
// node last reported them (about once a second).
struct NodeStatus {
  int rank = 0;
  std::string host;
  std::string state;            // joining, running, left, failed, lost (its heartbeats stopped)
  double heartbeat_age_s = 0;   // since the head last heard from it
  int64_t step = -1;            // the step its last heartbeat carried (-1: none yet)
  double report_age_s = -1;     // age of the report below (-1: none received)
  std::vector<ActorStatus> actors;
  std::vector<ChannelStatus> channels;
  StoreStatus store;
};

struct JobStatus {
  std::string id;     // "j1"
  std::string name;   // [job] name
  std::string state;  // queued (waiting for GPUs), pending, running, succeeded, failed, stopped
  std::string error;  // why it failed; "" otherwise
  double seconds = 0;
  uint64_t items_done = 0;   // items popped from the job's channels
  uint64_t items_total = 0;  // expected items when the job file says (0: unknown)
  double items_per_s = 0;
  std::string verdict;       // the bottleneck, in one line
  std::string profile_table;
  std::vector<ActorStatus> actors;
  std::vector<ChannelStatus> channels;
  StoreStatus store;
  std::vector<StageStatus> stages;
  TrainingStatus training;
  int node = -1;  // this process's node rank in a job on several nodes; -1: one process
  std::vector<NodeStatus> nodes;  // at the head of a job on several nodes: every node, by rank

  bool finished() const { return state != "pending" && state != "queued" && state != "running"; }
};

// Which side of the job waits on which, e.g. "consumers wait on producers: 81% of consumer
// time blocked popping 'objects'; largest stage demo.queue_get (62% of wall)". When actors
// share a GPU and report GPU-busy stages (gpu_verdict.h), from how busy each one keeps the
// GPU; otherwise from the channels' blocked time. The stage note leaves GPU-busy stages out.
// When checkpointing holds a training loop (stages *.checkpoint.snapshot +
// *.checkpoint.wait) for >= 20% of the wall and the loop is not starved longer by its
// producers, the verdict starts "checkpointing blocks training" and names those stages.
std::string BottleneckVerdict(const JobStatus& job);

// The full report `tandem status JOB` prints.
std::string FormatJobStatus(const JobStatus& job);
// One line per job, for `tandem list jobs` / `tandem status` with several jobs.
std::string FormatJobList(const std::vector<JobStatus>& jobs);
// One line per actor of every job, for `tandem list actors`.
std::string FormatActorList(const std::vector<JobStatus>& jobs);
// JSON (an object for one job, an array for a list). Keys are the struct fields' names.
std::string JobStatusToJson(const JobStatus& job, int indent = 2);
std::string JobListToJson(const std::vector<JobStatus>& jobs, int indent = 2);

}  // namespace tandem
