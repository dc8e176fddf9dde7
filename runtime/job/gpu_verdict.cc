#include "runtime/job/gpu_verdict.h"

#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace tandem {
namespace {

std::string PrefixOf(const std::string& stage) { return stage.substr(0, stage.find('.')); }

bool BelongsTo(const ActorStatus& a, const std::string& prefix) {
  if (a.group == prefix) return true;
  const std::string tail = "." + prefix;
  return a.class_name.size() > tail.size() &&
         a.class_name.compare(a.class_name.size() - tail.size(), tail.size(), tail) == 0;
}

// GPU-busy seconds per stage prefix.
std::map<std::string, double> BusySeconds(const JobStatus& job) {
  std::map<std::string, double> out;
  for (const StageStatus& st : job.stages)
    if (IsGpuBusyStage(st.name)) out[PrefixOf(st.name)] += st.total_s;
  return out;
}

}  // namespace

bool IsGpuBusyStage(const std::string& name) {
  const size_t dot = name.find('.');
  return dot != std::string::npos && name.compare(dot, 5, ".gpu.") == 0;
}

std::vector<GpuSideShare> GpuSharesOn(const JobStatus& job, int gpu) {
  std::vector<GpuSideShare> out;
  if (job.seconds <= 0 || gpu < 0) return out;
  for (const auto& [prefix, busy_s] : BusySeconds(job)) {
    // Prefer the group named `prefix`; only without one, groups by class.
    const bool by_group = std::any_of(job.actors.begin(), job.actors.end(),
                                      [&](const ActorStatus& a) { return a.group == prefix; });
    int replicas = 0;
    bool on_gpu = false;
    for (const ActorStatus& a : job.actors) {
      if (by_group ? a.group != prefix : !BelongsTo(a, prefix)) continue;
      ++replicas;
      on_gpu |= a.gpu == gpu;
    }
    if (!on_gpu || replicas == 0) continue;
    out.push_back({prefix, replicas, std::min(1.0, busy_s / (job.seconds * replicas))});
  }
  std::sort(out.begin(), out.end(),
            [](const GpuSideShare& a, const GpuSideShare& b) { return a.busy > b.busy; });
  return out;
}

std::optional<std::string> SharedGpuVerdict(const JobStatus& job, double wait_threshold) {
  std::set<int> gpus;
  for (const ActorStatus& a : job.actors)
    if (a.gpu >= 0) gpus.insert(a.gpu);
  for (int gpu : gpus) {
    const std::vector<GpuSideShare> sides = GpuSharesOn(job, gpu);
    if (sides.size() < 2 || sides[0].busy < kGpuSaturated) continue;
    std::vector<std::string> names, shares;
    for (const GpuSideShare& s : sides) {
      names.push_back(s.prefix);
      shares.push_back(fmt::format("{} {:.0f}%", s.prefix, 100 * s.busy));
    }
    const std::string head =
        fmt::format("GPU {} is shared by {} (stream busy, overlapping: {})", gpu,
                    fmt::join(names, " and "), fmt::join(shares, ", "));
    std::vector<std::string> idle;
    for (size_t i = 1; i < sides.size(); ++i)
      if (sides[0].busy - sides[i].busy >= wait_threshold)
        idle.push_back(fmt::format("the {}'s idles {:.0f}% of the time waiting on it",
                                   sides[i].prefix, 100 * (1 - sides[i].busy)));
    if (idle.empty())
      return fmt::format("{}: the GPU bounds the job; every side keeps it busy, none waits "
                         "long", head);
    return fmt::format("{}: the {} bounds: its GPU work never waits, {}", head, sides[0].prefix,
                       fmt::join(idle, ", "));
  }
  return std::nullopt;
}

}  // namespace tandem
