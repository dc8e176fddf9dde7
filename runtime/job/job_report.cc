#include "runtime/job/job_report.h"

#include <cstdlib>

#include <fmt/format.h>

#include "runtime/profile/profile_stats.h"

namespace tandem {
namespace {

// Replicas of `job` that write (`out`) or read (`in`) channel `name`.
int Ports(const JobSpec& job, const std::string& port, const std::string& name) {
  int n = 0;
  for (const auto& g : job.actors)
    if (auto v = g.settings.GetString(port, ""); v.ok() && *v == name) n += static_cast<int>(g.replicas);
  return n;
}

// The whole run, not the last window: cumulative stats over the job's wall time.
void Cumulative(ProfileSnapshot* snap, double wall_ns) {
  for (StageReport& r : snap->stages) {
    r.window = r.cumulative;
    r.percent_of_wall =
        wall_ns > 0 ? 100.0 * static_cast<double>(r.cumulative.total_ns) / wall_ns : 0;
  }
  snap->window_start_ns = snap->window_end_ns - static_cast<int64_t>(wall_ns);
}

}  // namespace

std::string JobReport::ToString() const {
  std::string out = fmt::format("job '{}' {} in {:.2f}s\n", job_name,
                                status.ok() ? "finished" : "FAILED", seconds);
  for (const auto& a : actors) {
    out += fmt::format("  {:<16} {}{}{}\n", a.name, a.status.ok() ? a.summary : a.status.ToString(),
                       a.restarts ? fmt::format(" (restarted {}x)", a.restarts) : "", "");
  }
  for (const auto& c : channels) {
    out += fmt::format("  channel {:<10} pushed {} popped {} max depth {}/{}\n", c.name, c.total_pushed,
                       c.total_popped, c.max_depth, c.capacity);
  }
  out += fmt::format("  store: {} live objects, {} used at end, high-water {} of {}\n",
                     store.live_objects, FormatBytes(store.bytes_used),
                     FormatBytes(store.high_water), FormatBytes(store.capacity));
  if (!profile_table.empty()) out += profile_table;
  if (!status.ok()) out += fmt::format("  error: {}\n", status.ToString());
  return out;
}

JobStatus JobStatusOf(const BuiltJob& live, const ProfileSnapshot& snap) {
  JobStatus st;
  st.name = live.job->name;
  st.state = "running";
  st.seconds = SecondsSince(live.start);
  for (const ActorInfo& info : live.system->Snapshot()) {
    ActorStatus a;
    a.name = info.name;
    a.class_name = info.class_name;
    size_t slash = info.name.rfind('/');
    a.group = info.name.substr(0, slash);
    if (slash != std::string::npos) a.replica = std::atoi(info.name.c_str() + slash + 1);
    a.gpu = info.gpu;
    a.state = std::string(ActorStateName(info.state));
    a.restarts = info.restarts;
    a.max_restarts = info.max_restarts;
    a.mailbox_depth = info.mailbox_depth;
    a.messages_done = info.messages_done;
    a.stage = info.stage;
    a.last_error = info.last_error.ok() ? "" : info.last_error.ToString();
    st.actors.push_back(std::move(a));
  }
  for (const ChannelStats& c : live.channels->Snapshot()) {
    st.channels.push_back({c.name, c.depth, c.capacity, c.min_ready, c.max_depth, c.total_pushed,
                           c.total_popped, c.closed, c.push_wait_total_ns * 1e-9,
                           c.pop_wait_total_ns * 1e-9, Ports(*live.job, "out", c.name),
                           Ports(*live.job, "in", c.name)});
    st.items_done += c.total_popped;
  }
  for (const auto& g : live.job->actors) {
    auto out = g.settings.GetString("out", "");
    auto objects = g.settings.GetInt("objects", 0);
    if (out.ok() && !out->empty() && objects.ok()) st.items_total += *objects * g.replicas;
  }
  st.items_per_s = st.seconds > 0 ? static_cast<double>(st.items_done) / st.seconds : 0;
  StoreStats s = live.store->Stats();
  st.store = {s.capacity, s.bytes_used, s.high_water, s.live_objects, s.inflight_copies,
              s.local.refs, s.channel.refs, s.HoldersSummary()};
  // Cumulative timings over the job's wall time, as in the final report.
  ProfileSnapshot table = snap;
  Cumulative(&table, st.seconds * 1e9);
  for (const StageReport& r : table.stages) {
    const StageStats& c = r.cumulative;
    st.stages.push_back({r.name, c.count, c.total_ns * 1e-9, c.mean_ns * 1e-6, c.p50_ns * 1e-6,
                         c.p99_ns * 1e-6, r.percent_of_wall});
  }
  st.profile_table = FormatProfileTable(table);
  st.verdict = BottleneckVerdict(st);
  st.training = live.metrics->Training();
  return st;
}

JobReport FinishJob(BuiltJob& built, Status status, bool stopped, JobStatus* final_status) {
  built.reporter->Stop();
  ProfileSnapshot snap = built.profile->RollWindow();
  JobStatus final = JobStatusOf(built, snap);
  JobReport report;
  report.job_name = built.job->name;
  report.status = std::move(status);
  for (JobReplica& r : built.replicas) {
    r.result.restarts = r.ref.Info().restarts;
    report.actors.push_back(r.result);
  }
  report.channels = built.channels->Snapshot();
  // Items left in channels (a failed or stopped job) are dropped with them, releasing refs.
  built.channels.reset();
  built.env->channels = nullptr;
  report.store = built.store->Stats();
  if (report.store.live_objects != 0 && report.status.ok()) {
    report.status = InternalError("{} objects ({}) still live in the store after the job",
                                  report.store.live_objects,
                                  FormatBytes(report.store.bytes_used));
  }
  Cumulative(&snap, SecondsSince(built.start) * 1e9);
  report.profile_table = FormatProfileTable(snap);
  report.seconds = SecondsSince(built.start);
  final.store = {report.store.capacity,        report.store.bytes_used,
                 report.store.high_water,      report.store.live_objects,
                 report.store.inflight_copies, report.store.local.refs,
                 report.store.channel.refs,    report.store.HoldersSummary()};
  final.state = !report.status.ok() ? "failed" : stopped ? "stopped" : "succeeded";
  final.error = report.status.ok() ? "" : report.status.ToString();
  built.metrics->End(final.state, final.error);
  if (final_status != nullptr) *final_status = std::move(final);
  return report;
}

}  // namespace tandem
