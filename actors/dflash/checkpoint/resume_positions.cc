#include "actors/dflash/checkpoint/resume_positions.h"

#include <fmt/format.h>

#include "actors/dflash/checkpoint/checkpoint_resume.h"
#include "actors/dflash/checkpoint/checkpoint_state.h"
#include "runtime/core/logging.h"

namespace tandem::dflash {

Status ResumePositions::Set(const std::string& target_group,
                            std::map<int, data::DataPosition> positions,
                            const std::string& from) {
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, fresh] = by_group_.try_emplace(target_group, Entry{std::move(positions), from});
  if (!fresh) {
    return InvalidArgumentError("two resumed drafter groups train against target group '{}' "
                                "({} and {}); its data can continue from one of them only",
                                target_group, it->second.from, from);
  }
  return Status::Ok();
}

std::optional<data::DataPosition> ResumePositions::For(const std::string& target_group,
                                                       int replica) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto group = by_group_.find(target_group);
  if (group == by_group_.end()) return std::nullopt;
  auto it = group->second.positions.find(replica);
  if (it == group->second.positions.end()) return std::nullopt;
  return it->second;
}

Status PublishResumePositions(const JobSpec& job, const ActorGroupSpec& drafter,
                              JobRegistry& registry) {
  ASSIGN_OR_RETURN(ResumeMode resume, ParseResumeMode(drafter.settings));
  if (resume == ResumeMode::kOff) return Status::Ok();
  ASSIGN_OR_RETURN(std::string dir, CheckpointDir(drafter.settings));
  if (dir.empty()) return Status::Ok();  // the drafter refuses resume without a dir itself
  ASSIGN_OR_RETURN(std::string in, drafter.settings.GetString("in", ""));
  // The same choice as the drafter's (checkpoint_resume.h), which also verifies it.
  ASSIGN_OR_RETURN(std::optional<ResumePoint> point, FindResumePoint(dir));
  if (!point) return Status::Ok();
  const std::string from = fmt::format("actors.{} ({})", drafter.name, point->state.path);
  // The point's positions are keyed by writer index on `in`; each writer group gets its own.
  for (const ActorGroupSpec& g : job.actors) {
    if (job.PortIndex("out", in, g.name, 0) < 0) continue;  // does not write `in`
    std::map<int, data::DataPosition> by_replica;
    for (int r = 0; r < g.replicas; ++r) {
      auto it = point->state.positions.find(job.PortIndex("out", in, g.name, r));
      if (it != point->state.positions.end()) by_replica[r] = it->second;
    }
    TLOG_DEBUG("actors.{}: data of target group '{}' resumes from {} ({})", drafter.name,
               g.name, point->state.path, point->how);
    RETURN_IF_ERROR(registry.Get<ResumePositions>().Set(g.name, std::move(by_replica), from));
  }
  return Status::Ok();
}

}  // namespace tandem::dflash
