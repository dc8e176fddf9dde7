#include "runtime/sched/placement.h"

#include <algorithm>
#include <cmath>

#include <fmt/ranges.h>

#include "runtime/core/clock.h"

namespace tandem::sched {
namespace {

constexpr int64_t kUnitsPerGpu = 1'000'000;

int64_t ToUnits(double gpus) { return std::llround(gpus * kUnitsPerGpu); }

bool IsWhole(double v) { return std::fabs(v - std::round(v)) < 1e-9; }

// "target: 5×1, drafter: 3×1" over the groups for which `amount` is non-zero.
template <typename F>
std::string Breakdown(const std::vector<GroupRequest>& groups, F amount) {
  std::vector<std::string> parts;
  for (const GroupRequest& g : groups) {
    std::string a = amount(g);
    if (!a.empty()) parts.push_back(fmt::format("{}: {}×{}", g.name, g.replicas, a));
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

Status Validate(const GroupRequest& g) {
  if (g.name.empty()) return InvalidArgumentError("an actor group needs a name");
  if (g.replicas < 1) {
    return InvalidArgumentError("actors.{}: replicas must be >= 1, got {}", g.name, g.replicas);
  }
  if (!(g.gpus >= 0) || (g.gpus > 1 && !IsWhole(g.gpus))) {
    return InvalidArgumentError(
        "actors.{}: gpus = {} per replica; use a share in (0, 1) or a whole number", g.name,
        g.gpus);
  }
  if (g.gpus > 0 && ToUnits(g.gpus) == 0) {
    return InvalidArgumentError("actors.{}: gpus = {} is below the smallest share (1e-6)",
                                g.name, g.gpus);
  }
  if (!(g.cpus >= 0)) {
    return InvalidArgumentError("actors.{}: cpus must be >= 0, got {}", g.name, g.cpus);
  }
  return Status::Ok();
}

std::string FreeShares(const std::vector<int64_t>& free) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < free.size(); ++i) {
    parts.push_back(fmt::format("gpu{} {}", i, static_cast<double>(free[i]) / kUnitsPerGpu));
  }
  return parts.empty() ? "none" : fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

Result<GroupRequest> GroupRequestFromConfig(std::string name, const ConfigValue& section) {
  GroupRequest g;
  g.name = std::move(name);
  ASSIGN_OR_RETURN(int64_t replicas, section.GetInt("replicas", 1));
  ASSIGN_OR_RETURN(g.gpus, section.GetDouble("gpus", 0));
  ASSIGN_OR_RETURN(g.cpus, section.GetDouble("cpus", 0));
  ASSIGN_OR_RETURN(int64_t pinned, section.GetInt("pinned_bytes", 0));
  if (replicas < 1 || replicas > 1'000'000) {
    return InvalidArgumentError("actors.{}: replicas must be in [1, 1000000], got {}", g.name,
                                replicas);
  }
  if (pinned < 0) {
    return InvalidArgumentError("actors.{}: pinned_bytes must be >= 0, got {}", g.name, pinned);
  }
  g.replicas = static_cast<int>(replicas);
  g.pinned_bytes = static_cast<uint64_t>(pinned);
  RETURN_IF_ERROR(Validate(g));
  return g;
}

std::vector<int> Placement::GpusOf(std::string_view group) const {
  std::vector<int> out;
  bool any = false;
  for (const ReplicaAssignment& r : replicas) {
    if (r.group != group) continue;
    out.push_back(r.gpus.empty() ? -1 : r.gpus.front());
    any = any || !r.gpus.empty();
  }
  if (!any) out.clear();
  return out;
}

std::string Placement::ToString() const {
  std::string out;
  for (const ReplicaAssignment& r : replicas) {
    std::string gpus = r.gpus.empty() ? "no gpu"
                       : r.gpu_share < 1 ? fmt::format("{} of gpu {}", r.gpu_share, r.gpus[0])
                                         : fmt::format("gpu {}", fmt::join(r.gpus, ","));
    out += fmt::format("{}/{}: {}, {} cpu, {} pinned\n", r.group, r.replica, gpus, r.cpus,
                       FormatBytes(r.pinned_bytes));
  }
  return out;
}

Result<Placement> Place(const NodeResources& node, const std::vector<GroupRequest>& groups) {
  double total_gpus = 0, total_cpus = 0;
  uint64_t total_pinned = 0;
  for (const GroupRequest& g : groups) {
    RETURN_IF_ERROR(Validate(g));
    for (const GroupRequest& h : groups) {
      if (&h != &g && h.name == g.name) {
        return InvalidArgumentError("actor group '{}' is listed twice", g.name);
      }
    }
    total_gpus += g.replicas * g.gpus;
    total_cpus += g.replicas * g.cpus;
    total_pinned += g.pinned_bytes * static_cast<uint64_t>(g.replicas);
  }
  const int n = static_cast<int>(node.gpus.size());
  if (ToUnits(total_gpus) > int64_t{n} * kUnitsPerGpu) {
    return InvalidArgumentError(
        "job asks {} GPUs ({}), this node has {}", total_gpus,
        Breakdown(groups, [](const GroupRequest& g) {
          return g.gpus > 0 ? fmt::format("{}", g.gpus) : std::string();
        }),
        n);
  }
  if (total_cpus > node.cpu_slots + 1e-9) {
    return InvalidArgumentError(
        "job asks {} CPU slots ({}), this node has {}", total_cpus,
        Breakdown(groups, [](const GroupRequest& g) {
          return g.cpus > 0 ? fmt::format("{}", g.cpus) : std::string();
        }),
        node.cpu_slots);
  }
  if (total_pinned > node.pinned_bytes) {
    return InvalidArgumentError(
        "job asks {} of pinned memory ({}), this node has {}", FormatBytes(total_pinned),
        Breakdown(groups, [](const GroupRequest& g) {
          return g.pinned_bytes > 0 ? FormatBytes(g.pinned_bytes) : std::string();
        }),
        FormatBytes(node.pinned_bytes));
  }

  Placement out;
  std::vector<int64_t> free(n, kUnitsPerGpu);
  std::vector<size_t> shared;  // indices into out.replicas that ask for a share
  for (const GroupRequest& g : groups) {
    for (int r = 0; r < g.replicas; ++r) {
      ReplicaAssignment a{g.name, r, {}, 0, g.cpus, g.pinned_bytes};
      if (g.gpus >= 1) {
        int want = static_cast<int>(std::lround(g.gpus));
        for (int i = 0; i < n && static_cast<int>(a.gpus.size()) < want; ++i) {
          if (free[i] == kUnitsPerGpu) {
            free[i] = 0;
            a.gpus.push_back(i);
          }
        }
        // The total check above leaves room for every whole-GPU replica.
        TANDEM_CHECK(static_cast<int>(a.gpus.size()) == want);
        a.gpu_share = 1;
      } else if (g.gpus > 0) {
        shared.push_back(out.replicas.size());
        a.gpu_share = g.gpus;
      }
      out.replicas.push_back(std::move(a));
    }
  }
  std::stable_sort(shared.begin(), shared.end(), [&](size_t x, size_t y) {
    return out.replicas[x].gpu_share > out.replicas[y].gpu_share;
  });
  for (size_t idx : shared) {
    ReplicaAssignment& a = out.replicas[idx];
    const int64_t need = ToUnits(a.gpu_share);
    int best = -1;
    for (int i = 0; i < n; ++i) {
      if (free[i] >= need && (best < 0 || free[i] < free[best])) best = i;
    }
    if (best < 0) {
      return InvalidArgumentError(
          "cannot pack the job's GPU shares: actors.{} replica {} needs {} of a GPU, but the "
          "free shares are {}; use shares that add up to whole GPUs or add GPUs",
          a.group, a.replica, a.gpu_share, FreeShares(free));
    }
    free[best] -= need;
    a.gpus.push_back(best);
  }
  return out;
}

}  // namespace tandem::sched
