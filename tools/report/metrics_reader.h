// Reads a job's metrics file (JSON lines, schema in docs/metrics.md) for `tandem report`.
//
// Forgiving by design: a line that is not valid JSON (a truncated last line, a corrupt
// middle) or lacks a required field is skipped with a warning naming file and line, and
// the rest is read. A file with no training and no sample records is an error, as is a
// missing one. Records of a kind this reader does not know (a newer schema) are skipped
// with one warning. A resumed run appends a new header: its times continue from the last
// time of the previous segment, and a step logged twice (a restart redoing steps) keeps the
// later record.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runtime/core/status.h"

namespace tandem::report {

struct TrainRow {
  double t = 0;        // seconds since the run started
  int64_t step = 0;
  int64_t total_steps = 0;
  double loss = 0, acc = 0, tau = 0, grad_norm = 0, lr = 0, tok_s = 0;  // NaN when absent
  double sel_loss = 0, cand_recall = 0, sel_acc = 0;  // DFlash2's selector; NaN when absent
};

struct SampleRow {
  double t = 0;
  double window_s = 0;  // time since the previous sample
  double store_used = 0, store_high_water = 0, store_capacity = 0;  // bytes
  std::map<std::string, double> stage_seconds;  // seconds spent in the stage in the window
  std::map<std::string, double> channel_depth;  // items queued at the sample
};

struct RunData {
  std::string path;         // the metrics file read
  int schema = 0;           // 0: headerless lines from before the schema
  std::string job_name;
  std::string job_file;
  double started_unix = 0;
  std::vector<std::pair<std::string, std::string>> settings;  // in file order
  std::string train_actor;  // the actor whose records are plotted (the first one seen)
  std::vector<TrainRow> train;     // by step
  std::vector<SampleRow> samples;  // by time
  std::string end_state;           // "" when the file has no end record (still running, killed)
  std::string end_error;
  int lines = 0;                   // lines read
  std::vector<std::string> warnings;  // "FILE:LINE: what happened; skipped"
};

// The metrics file for RUN: RUN itself when a file, else RUN/metrics.jsonl, else the
// parent's (RUN is one checkpoint step_N folder). NotFound names what was looked for.
Result<std::string> ResolveMetricsPath(const std::string& run);
// Reads RUN (see ResolveMetricsPath).
Result<RunData> ReadRun(const std::string& run);
// Parses metrics text; `path` names it in warnings and errors.
Result<RunData> ParseMetrics(const std::string& text, const std::string& path);

}  // namespace tandem::report
