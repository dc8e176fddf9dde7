#include "tools/progress/progress_line.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <vector>

#include <fmt/format.h>

#include "runtime/core/clock.h"

namespace tandem::cli {
namespace {

struct Field {
  std::string text;
  int priority;  // higher stays longer when the line must shrink
};

// Cuts `s` to `width` columns, ending in "…" when something was cut.
std::string Cut(const std::string& s, int width) {
  if (DisplayWidth(s) <= width) return s;
  std::string out;
  int cols = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const bool starts = (static_cast<unsigned char>(s[i]) & 0xC0) != 0x80;
    if (starts && ++cols > width - 1) break;
    out += s[i];
  }
  return out + "\u2026";
}

std::string Join(const std::vector<Field>& fields) {
  std::string out;
  for (const Field& f : fields) {
    if (!out.empty()) out += "  ";
    out += f.text;
  }
  return out;
}

std::vector<Field> TrainingFields(const JobStatus& j) {
  const TrainingStatus& t = j.training;
  std::vector<Field> f;
  if (t.total_steps > 0) {
    const double pct = 100.0 * static_cast<double>(t.step) / static_cast<double>(t.total_steps);
    f.push_back({fmt::format("step {}/{}", t.step, t.total_steps), 100});
    f.push_back({fmt::format("{:.0f}%", pct), 55});
  } else {
    f.push_back({fmt::format("step {} (no total)", t.step), 100});
  }
  f.push_back({t.has_metrics ? fmt::format("loss {:.3f}", t.loss) : "loss -", 95});
  f.push_back({t.has_metrics ? fmt::format("\u03c4 {:.2f}", t.tau) : "\u03c4 -", 75});
  if (t.eval.active)  // the drafter's eval: tau by speculative decoding
    f.push_back({fmt::format("eval \u03c4 {:.2f}", t.eval.tau), 72});
  f.push_back({t.has_metrics ? fmt::format("acc {:.2f}", t.acc) : "acc -", 30});
  f.push_back({t.has_metrics ? fmt::format("{:.0f} tok/s", t.tok_s) : "- tok/s", 70});
  f.push_back({fmt::format("{} elapsed", FormatDuration(j.seconds)), 50});
  const int64_t left = t.total_steps - t.step;
  std::string eta = "ETA -";
  if (t.total_steps > 0 && left <= 0) eta = "ETA 0s";
  else if (t.total_steps > 0 && t.steps_per_s > 0)
    eta = "ETA " + FormatDuration(static_cast<double>(left) / t.steps_per_s);
  else if (t.total_steps == 0) eta = "ETA none (no total)";
  f.push_back({eta, 90});
  return f;
}

std::vector<Field> ItemFields(const JobStatus& j) {
  std::vector<Field> f;
  if (j.items_total > 0) {
    f.push_back({fmt::format("items {}/{}", j.items_done, j.items_total), 100});
    f.push_back({fmt::format("{:.0f}%", 100.0 * j.items_done / j.items_total), 60});
  } else {
    f.push_back({fmt::format("items {}", j.items_done), 100});
  }
  f.push_back({fmt::format("{:.0f}/s", j.items_per_s), 65});
  f.push_back({fmt::format("{} elapsed", FormatDuration(j.seconds)), 50});
  if (j.items_total > 0 && j.items_per_s > 0 && j.items_done < j.items_total) {
    f.push_back({"ETA " + FormatDuration((j.items_total - j.items_done) / j.items_per_s), 90});
  } else if (j.items_total == 0) {
    f.push_back({"no total for this job kind", 80});
  }
  return f;
}

}  // namespace

int DisplayWidth(const std::string& s) {
  int n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

std::string FormatDuration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const int64_t s = static_cast<int64_t>(std::llround(seconds));
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}:{:02d}", s / 60, s % 60);
  return fmt::format("{}:{:02d}:{:02d}", s / 3600, (s / 60) % 60, s % 60);
}

std::string ShortVerdict(const JobStatus& job) {
  // BottleneckVerdict's first words name the side that waits (job_status.cc).
  const std::string& v = job.verdict;
  if (v.rfind("consumers wait", 0) == 0) return "producer-bound";
  if (v.rfind("producers wait", 0) == 0) return "consumer-bound";
  if (v.rfind("balanced", 0) == 0) return "balanced";
  if (v.rfind("checkpointing", 0) == 0) return "checkpoint-bound";
  if (v.rfind("evaluation", 0) == 0) return "eval-bound";
  // A shared GPU (runtime/job/gpu_verdict.h): "... the drafter bounds: ..." or "the GPU
  // bounds the job".
  if (v.rfind("GPU ", 0) == 0) {
    if (v.find("the GPU bounds") != std::string::npos) return "GPU-bound (shared)";
    const size_t end = v.find(" bounds:"), start = v.rfind("the ", end);
    if (end != std::string::npos && start != std::string::npos)
      return v.substr(start + 4, end - start - 4) + "-bound (shared GPU)";
  }
  return v.substr(0, v.find(':'));
}

int TerminalWidth(int fd) {
  winsize ws{};
  if (::ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0) return ws.ws_col;
  if (const char* cols = std::getenv("COLUMNS"); cols != nullptr && std::atoi(cols) > 0)
    return std::atoi(cols);
  return 80;
}

std::string FormatProgressLine(const JobStatus& job, int width) {
  width = std::max(width, 20);
  std::vector<Field> fields;
  fields.push_back({fmt::format("[{}]", job.name), 120});
  if (job.state == "pending") return Cut(fields[0].text + "  pending: starting the job", width);
  if (job.state != "running") fields.push_back({job.state, 110});
  std::vector<Field> body = job.training.active ? TrainingFields(job) : ItemFields(job);
  fields.insert(fields.end(), body.begin(), body.end());
  if (!job.training.active)
    fields.push_back({fmt::format("store {}/{}", FormatBytes(job.store.used),
                                  FormatBytes(job.store.capacity)), 40});
  if (std::string v = ShortVerdict(job); !v.empty()) fields.push_back({v, 60});
  // Drop the least important field until the line fits (keeping at least the first two).
  while (DisplayWidth(Join(fields)) > width && fields.size() > 2) {
    auto lowest = std::min_element(fields.begin(), fields.end(), [](const Field& a, const Field& b) {
      return a.priority < b.priority;
    });
    fields.erase(lowest);
  }
  return Cut(Join(fields), width);
}

}  // namespace tandem::cli
