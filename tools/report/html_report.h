// `tandem report`: one self-contained HTML page for a run (or two runs overlaid) from the
// metrics file: a summary, warnings about unreadable lines, inline SVG charts (loss,
// accuracy and tau by step; tok/s over time; the per-stage profile over time, stacked; the
// store's use and high-water mark; channel depths) and the job's settings. No script and no
// network: the page is the file.
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "runtime/core/status.h"
#include "tools/report/metrics_reader.h"

namespace tandem::report {

// The page for `run`, with `compare` overlaid when it is not null.
std::string RenderReport(const RunData& run, const RunData* compare);

// Reads RUN (and RUN2 when not empty), writes the page to `out` (default: beside the metrics
// file, report.html for a checkpoint dir, NAME.html for NAME.jsonl). Warnings go to
// `warnings`. Returns the path written.
Result<std::string> WriteReport(const std::string& run, const std::string& compare,
                                const std::string& out, std::vector<std::string>* warnings);

}  // namespace tandem::report
