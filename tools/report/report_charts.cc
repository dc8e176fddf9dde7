#include "tools/report/report_charts.h"

#include <cmath>
#include <filesystem>
#include <functional>
#include <set>

#include <fmt/format.h>

namespace tandem::report {
namespace {

using TrainField = std::function<double(const TrainRow&)>;
using SampleField = std::function<double(const SampleRow&)>;

bool AnyFinite(const Series& s) {
  for (double v : s.y)
    if (std::isfinite(v)) return true;
  return false;
}

Chart ByStep(const std::vector<const RunData*>& runs, const char* id, const char* title,
             const char* y_label, const TrainField& f, bool from_zero) {
  Chart c{id, title, "training step", y_label, {}, from_zero};
  for (size_t i = 0; i < runs.size(); ++i) {
    Series s{RunLabel(*runs[i], i), {}, {}, i > 0};
    for (const TrainRow& r : runs[i]->train) {
      s.x.push_back(static_cast<double>(r.step));
      s.y.push_back(f(r));
    }
    c.series.push_back(std::move(s));
  }
  return c;
}

Chart ByTime(const std::vector<const RunData*>& runs, const char* id, const char* title,
             const char* y_label, const SampleField& f) {
  Chart c{id, title, "time since start (s)", y_label, {}, true};
  for (size_t i = 0; i < runs.size(); ++i) {
    Series s{RunLabel(*runs[i], i), {}, {}, i > 0};
    for (const SampleRow& r : runs[i]->samples) {
      s.x.push_back(r.t);
      s.y.push_back(f(r));
    }
    c.series.push_back(std::move(s));
  }
  return c;
}

bool HasData(const Chart& c) {
  for (const Series& s : c.series)
    if (AnyFinite(s)) return true;
  return false;
}

}  // namespace

std::string RunLabel(const RunData& run, size_t index) {
  const std::string file = std::filesystem::path(run.path).parent_path().filename().string();
  std::string name = run.job_name.empty() ? std::string("run") : run.job_name;
  return fmt::format("{}{} ({})", index == 0 ? "" : "B: ", name, file.empty() ? run.path : file);
}

std::vector<Chart> LineCharts(const std::vector<const RunData*>& runs) {
  constexpr double kMiB = 1024.0 * 1024.0;
  std::vector<Chart> charts;
  charts.push_back(ByStep(runs, "loss", "Loss by step", "loss (nats per token)",
                          [](const TrainRow& r) { return r.loss; }, false));
  charts.push_back(ByStep(runs, "acc", "Accuracy by step", "top-1 accuracy (fraction)",
                          [](const TrainRow& r) { return r.acc; }, true));
  charts.push_back(ByStep(runs, "tau", "\u03c4 (estimated acceptance length) by step",
                          "\u03c4 (tokens per block)", [](const TrainRow& r) { return r.tau; },
                          false));
  // A DFlash2 drafter's selector (charts without data are dropped below).
  charts.push_back(ByStep(runs, "sel_loss", "Selector loss by step",
                          "selector loss (nats per covered row)",
                          [](const TrainRow& r) { return r.sel_loss; }, false));
  charts.push_back(ByStep(runs, "cand_recall", "Candidate recall by step",
                          "rows whose target is a candidate (fraction)",
                          [](const TrainRow& r) { return r.cand_recall; }, true));
  charts.push_back(ByStep(runs, "sel_acc", "Selector accuracy by step",
                          "covered rows ranked first (fraction)",
                          [](const TrainRow& r) { return r.sel_acc; }, true));
  // tok/s of the training records, over their time.
  Chart tok{"tok_s", "Throughput over time", "time since start (s)",
            "tokens/s (mean since run start)", {}, true};
  for (size_t i = 0; i < runs.size(); ++i) {
    Series s{RunLabel(*runs[i], i), {}, {}, i > 0};
    for (const TrainRow& r : runs[i]->train) {
      s.x.push_back(r.t);
      s.y.push_back(r.tok_s);
    }
    tok.series.push_back(std::move(s));
  }
  charts.push_back(std::move(tok));
  Chart store = ByTime(runs, "store", "Object store use and high-water mark",
                       "store (MiB)", [&](const SampleRow& r) { return r.store_used / kMiB; });
  for (size_t i = 0; i < runs.size(); ++i) {
    store.series[i].name = RunLabel(*runs[i], i) + " used";
    Series hw{RunLabel(*runs[i], i) + " high-water", {}, {}, true};
    for (const SampleRow& r : runs[i]->samples) {
      hw.x.push_back(r.t);
      hw.y.push_back(r.store_high_water / kMiB);
    }
    store.series.push_back(std::move(hw));
  }
  charts.push_back(std::move(store));
  std::set<std::string> channels;
  for (const RunData* r : runs)
    for (const SampleRow& s : r->samples)
      for (const auto& [name, depth] : s.channel_depth) channels.insert(name);
  for (const std::string& ch : channels) {
    charts.push_back(ByTime(runs, ("channel_" + ch).c_str(),
                            fmt::format("Channel '{}' depth", ch).c_str(), "queued items",
                            [ch](const SampleRow& r) {
                              auto it = r.channel_depth.find(ch);
                              return it == r.channel_depth.end() ? NAN : it->second;
                            }));
  }
  std::vector<Chart> kept;
  for (Chart& c : charts)
    if (HasData(c)) kept.push_back(std::move(c));
  return kept;
}

Chart ProfileChart(const RunData& run, const std::string& id) {
  Chart c{id, "Per-stage profile over time (stacked)", "time since start (s)",
          "stage time per wall second (s/s)", {}, true};
  std::set<std::string> stages;
  for (const SampleRow& s : run.samples)
    for (const auto& [name, secs] : s.stage_seconds) stages.insert(name);
  for (const std::string& name : stages) {
    Series s{name, {}, {}, false};
    for (const SampleRow& r : run.samples) {
      auto it = r.stage_seconds.find(name);
      s.x.push_back(r.t);
      const double v = it == r.stage_seconds.end() ? 0 : it->second;
      s.y.push_back(r.window_s > 0 ? v / r.window_s : NAN);
    }
    c.series.push_back(std::move(s));
  }
  return c;
}

}  // namespace tandem::report
