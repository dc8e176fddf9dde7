# The control plane's wire format: every message between the tandem CLI and a daemon (or a
# running `tandem run`). Each frame carries one Request or one Response (see framing.h).
@0x84fb450c77b80d07;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("tandem::wire");

struct Request {
  token @0 :Text;               # required on TCP connections; ignored on the Unix socket
  union {
    ping @1 :Void;
    status @2 :Text;            # job id or name; "" for every job
    submit @3 :Submit;
    stop @4 :Text;              # job id or name
    shutdown @5 :Void;
    logs @6 :LogsQuery;
    clusterJoin @7 :ClusterRequest;       # runtime/cluster: a node joins the head
    clusterHeartbeat @8 :ClusterRequest;  # a node's progress (or failure); the reply says
                                          # whether the cluster failed
    clusterLeave @9 :ClusterRequest;      # a node leaves (failure "" when it finished)
    kvPut @10 :ClusterRequest;
    kvGet @11 :ClusterRequest;            # waits (up to waitMs) for the key
    barrier @12 :ClusterRequest;          # waits (up to waitMs) for `count` arrivals
  }
}

# One message for every cluster request; each kind reads the fields it needs.
struct ClusterRequest {
  nodeRank @0 :Int32;
  host @1 :Text;
  nonce @2 :Text;               # join: this process's random id (a re-sent join is no duplicate)
  jobHash @3 :Text;
  version @4 :Text;
  inventory @5 :NodeInventory;
  step @6 :Int64;
  failure @7 :Text;
  key @8 :Text;                 # kv key or barrier name
  value @9 :Data;
  count @10 :Int32;
  waitMs @11 :UInt32;
}

struct NodeInventory {
  gpus @0 :List(Gpu);
  cpuSlots @1 :Int32;
  pinnedBytes @2 :UInt64;
}

struct Gpu {
  index @0 :Int32;
  name @1 :Text;
  memoryBytes @2 :UInt64;
  fake @3 :Bool;
  computeCapability @4 :Int32;
}

struct ClusterReply {
  ready @0 :Bool;               # join: placed; kvGet: found; barrier: all arrived
  value @1 :Data;
  failure @2 :Text;             # the cluster's failure, "" while healthy
  placement @3 :List(NodePlacement);  # join: by node rank
  hosts @4 :List(Text);         # join: each node's host, by rank
}

struct NodePlacement {
  replicas @0 :List(Replica);
}

struct Replica {
  group @0 :Text;
  replica @1 :Int32;            # the group's global replica index
  gpus @2 :List(Int32);
  gpuShare @3 :Float64;
  cpus @4 :Float64;
  pinnedBytes @5 :UInt64;
}

struct Submit {
  path @0 :Text;                # absolute path of the job file (names it in errors, resolves plugins)
  text @1 :Text;                # the job file's contents
}

struct LogsQuery {
  job @0 :Text;
  actor @1 :Text;               # "" for every line of the job
  after @2 :UInt64;             # return lines with sequence > after
  maxLines @3 :UInt32;
}

struct Response {
  union {
    error @0 :Error;
    ok @1 :Void;
    pong @2 :Pong;
    jobs @3 :List(JobStatus);
    submitted @4 :Text;         # the new job's id
    logs @5 :LogsReply;
    cluster @6 :ClusterReply;
  }
}

struct Error {
  code @0 :UInt16;              # tandem::StatusCode
  message @1 :Text;
  unauthenticated @2 :Bool;     # refused by the TCP token check (the CLI exits 1, not 2)
}

struct Pong {
  server @0 :Text;              # "daemon" or "run"
  pid @1 :Int64;
  version @2 :Text;
}

struct LogsReply {
  lines @0 :List(LogLine);
  last @1 :UInt64;              # sequence of the last line returned (or `after` if none)
  finished @2 :Bool;            # the job has ended: no more lines will come
}

struct LogLine {
  seq @0 :UInt64;
  actor @1 :Text;
  text @2 :Text;
}

struct JobStatus {
  id @0 :Text;
  name @1 :Text;
  state @2 :Text;               # pending, running, succeeded, failed, stopped
  error @3 :Text;
  seconds @4 :Float64;
  itemsDone @5 :UInt64;
  itemsTotal @6 :UInt64;        # 0 when unknown
  itemsPerSecond @7 :Float64;
  verdict @8 :Text;
  profileTable @9 :Text;
  actors @10 :List(ActorStatus);
  channels @11 :List(ChannelStatus);
  store @12 :StoreStatus;
  stages @13 :List(StageStatus);
  training @14 :TrainingStatus;
  node @15 :Int32 = -1;         # this process's node rank in a job on several nodes; -1: one process
  nodes @16 :List(NodeStatus);  # at the head of a job on several nodes: every node, by rank
}

struct NodeStatus {             # one node of a job on several nodes, as the head sees it
  rank @0 :Int32;
  host @1 :Text;
  state @2 :Text;               # joining, running, left, failed, lost
  heartbeatAgeSeconds @3 :Float64;
  step @4 :Int64;               # from its last heartbeat; -1 before the first
  reportAgeSeconds @5 :Float64; # -1: no report received
  actors @6 :List(ActorStatus);
  channels @7 :List(ChannelStatus);
  store @8 :StoreStatus;
}

struct TrainingStatus {         # what training actors publish (runtime/job/job_metrics.h)
  active @0 :Bool;
  step @1 :Int64;
  totalSteps @2 :Int64;
  stepsPerSecond @3 :Float64;
  hasMetrics @4 :Bool;
  metricsStep @5 :Int64;
  loss @6 :Float64;
  acc @7 :Float64;
  tau @8 :Float64;
  tokensPerSecond @9 :Float64;
  eval @10 :EvalStatus;
  selector @11 :SelectorMetrics;
}

struct SelectorMetrics {        # a DFlash2 drafter's candidate selector (job_status.h)
  active @0 :Bool;
  loss @1 :Float64;
  recall @2 :Float64;
  accuracy @3 :Float64;
}

struct EvalStatus {             # the last evaluation by speculative decoding (job_status.h)
  active @0 :Bool;
  step @1 :Int64;
  tau @2 :Float64;
  tokensPerSecond @3 :Float64;
  prompts @4 :Int64;
  acceptRate @5 :List(Float64);
  bestStep @6 :Int64;
  bestTau @7 :Float64;
}

struct ActorStatus {
  name @0 :Text;
  className @1 :Text;
  group @2 :Text;
  replica @3 :Int32;
  gpu @4 :Int32;
  state @5 :Text;
  restarts @6 :Int32;
  maxRestarts @7 :Int32;
  mailboxDepth @8 :UInt64;
  messagesDone @9 :UInt64;
  stage @10 :Text;
  lastError @11 :Text;
}

struct ChannelStatus {
  name @0 :Text;
  depth @1 :UInt64;
  capacity @2 :UInt64;
  minReady @3 :UInt64;
  maxDepth @4 :UInt64;
  pushed @5 :UInt64;
  popped @6 :UInt64;
  closed @7 :Bool;
  pushWaitSeconds @8 :Float64;
  popWaitSeconds @9 :Float64;
  writers @10 :Int32;
  readers @11 :Int32;
}

struct StoreStatus {
  capacity @0 :UInt64;
  used @1 :UInt64;
  highWater @2 :UInt64;
  objects @3 :UInt64;
  inflightCopies @4 :UInt64;
  localRefs @5 :UInt64;
  channelRefs @6 :UInt64;
  holders @7 :Text;
}

struct StageStatus {
  name @0 :Text;
  count @1 :UInt64;
  totalSeconds @2 :Float64;
  meanMs @3 :Float64;
  p50Ms @4 :Float64;
  p99Ms @5 :Float64;
  percentOfWall @6 :Float64;
}
