// The charts of a report, built from one or two runs' metrics (svg_chart.h draws them).
// Thread-safety: pure functions.
#pragma once

#include <vector>

#include "tools/report/metrics_reader.h"
#include "tools/report/svg_chart.h"

namespace tandem::report {

// Loss, accuracy, tau by step; tok/s, store and channel depth over time (one series per
// run, the second dashed). Charts with no data in any run are left out.
std::vector<Chart> LineCharts(const std::vector<const RunData*>& runs);
// The per-stage profile of one run: the share of each wall second spent in each stage
// (s/s; above 1 when several actors work at once), stacked, by time.
Chart ProfileChart(const RunData& run, const std::string& id);
// The label of run i in legends: "NAME (file)".
std::string RunLabel(const RunData& run, size_t index);

}  // namespace tandem::report
