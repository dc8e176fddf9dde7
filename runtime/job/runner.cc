#include "runtime/job/runner.h"

#include <fmt/format.h>

#include "runtime/actor/plugin.h"
#include "runtime/actor/registry.h"
#include "runtime/core/clock.h"
#include "runtime/core/logging.h"
#include "runtime/job/job_spec_keys.h"

namespace tandem {
namespace {

Status CheckClasses(const JobSpec& job) {
  std::vector<std::string> known = ActorRegistry::Global().Names();
  for (const auto& g : job.actors) {
    if (ActorRegistry::Global().Find(g.class_name).ok()) continue;
    std::string hint = DidYouMean(g.class_name, known);
    return InvalidArgumentError("{}: actors.{}: unknown actor class '{}'{}; known classes: {}",
                                g.where, g.name, g.class_name,
                                hint.empty() ? "" : fmt::format(" (did you mean '{}'?)", hint),
                                fmt::join(known, ", "));
  }
  return Status::Ok();
}

}  // namespace

Status JobRunner::Check(const JobSpec& job, std::vector<std::string>* notes,
                        const sched::NodeResources* node) {
  RETURN_IF_ERROR(CheckSpec(job, notes));
  return PlaceJob(job, node).status();
}

Status JobRunner::CheckSpec(const JobSpec& job, std::vector<std::string>* notes) {
  for (const auto& plugin : job.plugins) {
    auto loaded = LoadPlugin(plugin);
    if (!loaded.ok()) return loaded.status().WithContext(fmt::format("{}: plugin", job.path));
    TLOG_DEBUG("plugin {}: {}", plugin, fmt::join(*loaded, ", "));
  }
  RETURN_IF_ERROR(CheckClasses(job));
  return CheckActorSections(job, notes);
}

void JobRunner::RequestStop() {
  stop_requested_.store(true);
  std::lock_guard<std::mutex> lock(mu_);
  if (supervisor_ != nullptr) supervisor_->RequestStop();
}

JobStatus JobRunner::Snapshot() {
  std::lock_guard<std::mutex> lock(mu_);
  if (final_) return *final_;
  if (live_ == nullptr) {
    JobStatus st;
    st.state = "pending";
    return st;
  }
  JobStatus st = JobStatusOf(*live_, live_->profile->RollWindow());
  if (stop_requested_.load()) st.state = "stopping";
  return st;
}

Result<JobReport> JobRunner::Run(const JobSpec& job) {
  const TimePoint start = SteadyClock::now();
  const sched::NodeResources* node = options_.resources ? &*options_.resources : nullptr;
  bool fake_gpus = options_.fake_gpus;
  sched::Placement placement;
  if (options_.placement) {
    RETURN_IF_ERROR(CheckSpec(job));
    placement = *options_.placement;
  } else {
    RETURN_IF_ERROR(Check(job, nullptr, node));
    ASSIGN_OR_RETURN(placement, PlaceJob(job, node, &fake_gpus));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<BuiltJob> built,
                   BuildJob(job, placement,
                            {.registry = options_.registry,
                             .make_device_current = !fake_gpus,
                             .start = start}));
  std::shared_ptr<void> attached;
  if (options_.attach) {
    ASSIGN_OR_RETURN(attached, options_.attach(*built));
  }
  JobSupervisor supervisor(built.get(), options_.progress_interval_s);
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_ = built.get();
    supervisor_ = &supervisor;
    if (stop_requested_.load()) supervisor.RequestStop();
  }
  Status status = supervisor.Run();
  {
    std::lock_guard<std::mutex> lock(mu_);
    live_ = nullptr;
    supervisor_ = nullptr;
  }
  attached.reset();  // after the actors, before the report's store check
  JobStatus final_status;
  JobReport report = FinishJob(*built, std::move(status), stop_requested_.load(), &final_status);
  {
    std::lock_guard<std::mutex> lock(mu_);
    final_ = std::move(final_status);
  }
  return report;
}

}  // namespace tandem
