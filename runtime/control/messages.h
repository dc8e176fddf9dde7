// The control plane's requests and replies as plain C++ values, and their encoding as
// Cap'n Proto messages (control.capnp) inside length-prefixed frames.
//
// A frame is an 8-byte header, the magic "TNDM" and the payload's size as a little-endian
// uint32, followed by the payload: one Cap'n Proto message in flat-array form. Frames over
// kMaxFrameBytes are refused before any of their payload is read. Decoding never throws: a
// malformed payload (a KJ exception inside Cap'n Proto) becomes a DataLoss Status.
// Thread-safety: value types and pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/core/status.h"
#include "runtime/job/job_status.h"
#include "runtime/sched/placement.h"
#include "runtime/sched/resources.h"

namespace tandem {

inline constexpr uint32_t kMaxFrameBytes = 16u << 20;
inline constexpr size_t kFrameHeaderBytes = 8;
// On TCP the first request of a connection must fit in this many bytes (and carry the
// token); a client with a larger request sends a ping first (client.h).
inline constexpr uint32_t kMaxUnauthenticatedFrameBytes = 64u << 10;

// The cluster requests' fields (runtime/cluster: a node and its head); each kind reads the
// fields it needs.
struct ClusterRequest {
  int32_t node_rank = 0;
  std::string host;                // join: the node's host name, for messages
  std::string nonce;               // join: the process's random id; a re-sent join is no duplicate
  std::string job_hash;            // join
  std::string version;             // join
  sched::NodeResources inventory;  // join
  int64_t step = 0;                // heartbeat: the node's progress
  std::string failure;             // heartbeat / leave: why the node failed; "" when healthy
  std::string key;                 // kv put / get: the key; barrier: its name
  std::string value;               // kv put: the bytes
  int32_t count = 0;               // barrier: how many arrivals it waits for
  uint32_t wait_ms = 0;            // join / get / barrier: how long the head may hold the reply
};

struct ClusterReply {
  bool ready = false;                       // join: placed; get: found; barrier: passed
  std::string value;                        // get
  std::string failure;                      // the cluster's failure; "" while healthy
  std::vector<sched::Placement> placement;  // join: what each node runs, by node rank
  std::vector<std::string> hosts;           // join: each node's host, by rank
};

struct ControlRequest {
  enum class Kind {
    kPing, kStatus, kSubmit, kStop, kShutdown, kLogs,
    kClusterJoin, kClusterHeartbeat, kClusterLeave, kKvPut, kKvGet, kBarrier
  };
  Kind kind = Kind::kPing;
  std::string token;
  std::string job;        // status / stop / logs: job id or name ("" = all for status)
  std::string path;       // submit: the job file's absolute path
  std::string text;       // submit: its contents
  std::string actor;      // logs: only this actor's lines ("" = all)
  uint64_t after = 0;     // logs: lines with sequence > after
  uint32_t max_lines = 1000;
  ClusterRequest cluster;  // the cluster kinds
};

struct LogLine {
  uint64_t seq = 0;
  std::string actor;  // "" for the job's own lines
  std::string text;
};

struct ControlResponse {
  enum class Kind { kError, kOk, kPong, kJobs, kSubmitted, kLogs, kCluster };
  Kind kind = Kind::kOk;
  Status error;                  // kError
  bool unauthenticated = false;  // kError: refused by the token check, before any handling
  std::string server;            // kPong: "daemon" or "run"
  int64_t pid = 0;               // kPong
  std::vector<JobStatus> jobs;   // kJobs
  std::string job_id;            // kSubmitted
  std::vector<LogLine> lines;    // kLogs
  uint64_t last = 0;             // kLogs
  bool finished = false;         // kLogs
  ClusterReply cluster;          // kCluster

  static ControlResponse Error(Status st) {
    ControlResponse r;
    r.kind = Kind::kError;
    r.error = std::move(st);
    return r;
  }
  static ControlResponse Unauthenticated(Status st) {
    ControlResponse r = Error(std::move(st));
    r.unauthenticated = true;
    return r;
  }
};

// Whole frames (header + payload), ready to write.
std::string EncodeRequest(const ControlRequest& req);
std::string EncodeResponse(const ControlResponse& resp);

// Checks a frame header; returns the payload size. InvalidArgument for a wrong magic or a
// payload over kMaxFrameBytes (the caller should reply with the error and close).
Result<uint32_t> ParseFrameHeader(const std::array<uint8_t, kFrameHeaderBytes>& header);

// Decode a payload (the bytes after the header). DataLoss for anything malformed.
Result<ControlRequest> DecodeRequest(const std::string& payload);
Result<ControlResponse> DecodeResponse(const std::string& payload);

}  // namespace tandem
