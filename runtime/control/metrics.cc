#include "runtime/control/metrics.h"

#include <fmt/format.h>

namespace tandem {
namespace {

// Label values escape backslash, quote and newline, as the exposition format requires.
std::string Esc(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\';
    if (c == '\n') {
      out += "\\n";
      continue;
    }
    out += c;
  }
  return out;
}

class Writer {
 public:
  void Family(const char* name, const char* type, const char* help) {
    current_ = name;
    out_ += fmt::format("# HELP {} {}\n# TYPE {} {}\n", name, help, name, type);
  }
  void Sample(const std::string& labels, double value) {
    out_ += fmt::format("{}{{{}}} {}\n", current_, labels, value);
  }
  std::string Take() { return std::move(out_); }

 private:
  std::string current_;
  std::string out_;
};

}  // namespace

std::string FormatPrometheus(const std::vector<JobStatus>& jobs) {
  Writer w;
  // A job on several nodes: every node serves its own metrics, labelled with its rank.
  auto job_label = [](const JobStatus& j) {
    return fmt::format("job=\"{}\",job_name=\"{}\"{}", Esc(j.id), Esc(j.name),
                       j.node >= 0 ? fmt::format(",node=\"{}\"", j.node) : std::string());
  };
  w.Family("tandem_job_running", "gauge", "1 while the job runs");
  for (const auto& j : jobs) w.Sample(job_label(j), j.state == "running" ? 1 : 0);
  w.Family("tandem_items_total", "counter", "items consumed from the job's channels");
  for (const auto& j : jobs) w.Sample(job_label(j), static_cast<double>(j.items_done));
  w.Family("tandem_items_per_second", "gauge", "items consumed per second over the job");
  for (const auto& j : jobs) w.Sample(job_label(j), j.items_per_s);
  w.Family("tandem_actor_state", "gauge", "1 for the actor's current state");
  for (const auto& j : jobs)
    for (const auto& a : j.actors)
      w.Sample(fmt::format("{},actor=\"{}\",class=\"{}\",state=\"{}\"", job_label(j), Esc(a.name),
                           Esc(a.class_name), Esc(a.state)), 1);
  w.Family("tandem_actor_restarts", "counter", "restarts of the actor");
  for (const auto& j : jobs)
    for (const auto& a : j.actors)
      w.Sample(fmt::format("{},actor=\"{}\"", job_label(j), Esc(a.name)), a.restarts);
  w.Family("tandem_actor_mailbox_depth", "gauge", "messages queued for the actor");
  for (const auto& j : jobs)
    for (const auto& a : j.actors)
      w.Sample(fmt::format("{},actor=\"{}\"", job_label(j), Esc(a.name)),
               static_cast<double>(a.mailbox_depth));
  w.Family("tandem_channel_depth", "gauge", "items queued in the channel");
  for (const auto& j : jobs)
    for (const auto& c : j.channels)
      w.Sample(fmt::format("{},channel=\"{}\"", job_label(j), Esc(c.name)),
               static_cast<double>(c.depth));
  w.Family("tandem_channel_capacity", "gauge", "the channel's capacity");
  for (const auto& j : jobs)
    for (const auto& c : j.channels)
      w.Sample(fmt::format("{},channel=\"{}\"", job_label(j), Esc(c.name)),
               static_cast<double>(c.capacity));
  w.Family("tandem_channel_wait_seconds_total", "counter", "time blocked on the channel");
  for (const auto& j : jobs)
    for (const auto& c : j.channels) {
      w.Sample(fmt::format("{},channel=\"{}\",side=\"push\"", job_label(j), Esc(c.name)), c.push_wait_s);
      w.Sample(fmt::format("{},channel=\"{}\",side=\"pop\"", job_label(j), Esc(c.name)), c.pop_wait_s);
    }
  w.Family("tandem_store_used_bytes", "gauge", "object store bytes in use");
  for (const auto& j : jobs) w.Sample(job_label(j), static_cast<double>(j.store.used));
  w.Family("tandem_store_capacity_bytes", "gauge", "object store capacity");
  for (const auto& j : jobs) w.Sample(job_label(j), static_cast<double>(j.store.capacity));
  w.Family("tandem_store_high_water_bytes", "gauge", "most object store bytes ever in use");
  for (const auto& j : jobs) w.Sample(job_label(j), static_cast<double>(j.store.high_water));
  w.Family("tandem_store_objects", "gauge", "live objects in the store");
  for (const auto& j : jobs) w.Sample(job_label(j), static_cast<double>(j.store.objects));
  w.Family("tandem_stage_seconds_total", "counter", "time spent in the profile stage");
  for (const auto& j : jobs)
    for (const auto& s : j.stages)
      w.Sample(fmt::format("{},stage=\"{}\"", job_label(j), Esc(s.name)), s.total_s);
  w.Family("tandem_stage_count_total", "counter", "timed executions of the profile stage");
  for (const auto& j : jobs)
    for (const auto& s : j.stages)
      w.Sample(fmt::format("{},stage=\"{}\"", job_label(j), Esc(s.name)), static_cast<double>(s.count));
  w.Family("tandem_stage_p99_seconds", "gauge", "99th percentile of the stage's duration");
  for (const auto& j : jobs)
    for (const auto& s : j.stages)
      w.Sample(fmt::format("{},stage=\"{}\"", job_label(j), Esc(s.name)), s.p99_ms * 1e-3);
  // Training jobs only (TrainingStatus::active): what the drafter read at its last log step.
  auto training = [&](const char* name, const char* type, const char* help, auto value) {
    w.Family(name, type, help);
    for (const auto& j : jobs)
      if (j.training.active) w.Sample(job_label(j), value(j.training));
  };
  training("tandem_train_step", "gauge", "training steps done (the slowest replica)",
           [](const TrainingStatus& t) { return static_cast<double>(t.step); });
  training("tandem_train_total_steps", "gauge", "the job's max_steps (0: unknown)",
           [](const TrainingStatus& t) { return static_cast<double>(t.total_steps); });
  training("tandem_train_steps_per_second", "gauge", "training steps per second",
           [](const TrainingStatus& t) { return t.steps_per_s; });
  training("tandem_train_loss", "gauge", "drafter loss at the last log step",
           [](const TrainingStatus& t) { return t.loss; });
  training("tandem_train_accuracy", "gauge", "drafter top-1 accuracy at the last log step",
           [](const TrainingStatus& t) { return t.acc; });
  training("tandem_train_tau", "gauge", "estimated acceptance length tau at the last log step",
           [](const TrainingStatus& t) { return t.tau; });
  training("tandem_train_tokens_per_second", "gauge", "tokens trained per second",
           [](const TrainingStatus& t) { return t.tok_s; });
  // DFlash2 drafters only (SelectorMetrics::active): the candidate selector.
  auto selector = [&](const char* name, const char* help, auto value) {
    w.Family(name, "gauge", help);
    for (const auto& j : jobs)
      if (j.training.active && j.training.selector.active)
        w.Sample(job_label(j), value(j.training.selector));
  };
  selector("tandem_train_selector_loss", "DFlash2 candidate selector loss at the last log step",
           [](const SelectorMetrics& s) { return s.loss; });
  selector("tandem_train_candidate_recall",
           "share of loss rows whose target is among the selector's top-k candidates",
           [](const SelectorMetrics& s) { return s.recall; });
  selector("tandem_train_selector_accuracy",
           "share of covered rows where the selector ranks the target first",
           [](const SelectorMetrics& s) { return s.accuracy; });
  // Jobs whose drafter evaluates by speculative decoding (its `eval` table): the last one.
  auto eval = [&](const char* name, const char* help, auto value) {
    w.Family(name, "gauge", help);
    for (const auto& j : jobs)
      if (j.training.eval.active) w.Sample(job_label(j), value(j.training.eval));
  };
  eval("tandem_eval_step", "the training step of the last evaluation",
       [](const EvalStatus& e) { return static_cast<double>(e.step); });
  eval("tandem_eval_tau", "acceptance length tau by speculative decoding at the last evaluation",
       [](const EvalStatus& e) { return e.tau; });
  eval("tandem_eval_best_tau", "the highest evaluated tau so far",
       [](const EvalStatus& e) { return e.best_tau; });
  eval("tandem_eval_best_step", "the training step of the highest evaluated tau",
       [](const EvalStatus& e) { return static_cast<double>(e.best_step); });
  eval("tandem_eval_tokens_per_second", "generated tokens per second at the last evaluation",
       [](const EvalStatus& e) { return e.tok_s; });
  w.Family("tandem_eval_accept_rate", "gauge",
           "share of verify steps that accepted the draft at this block position");
  for (const auto& j : jobs)
    for (size_t i = 0; i < j.training.eval.accept_rate.size(); ++i)
      w.Sample(fmt::format("{},position=\"{}\"", job_label(j), i + 1),
               j.training.eval.accept_rate[i]);
  // Every node's heartbeat age, from the head of a job on several nodes (a job in one
  // process is its own node 0, heard from now).
  w.Family("tandem_node_heartbeat_age_seconds", "gauge",
           "seconds since the cluster head last heard from the node");
  for (const auto& j : jobs) {
    const std::string job = fmt::format("job=\"{}\",job_name=\"{}\"", Esc(j.id), Esc(j.name));
    if (j.node < 0) w.Sample(job + ",node=\"0\"", 0);
    for (const NodeStatus& n : j.nodes)
      w.Sample(fmt::format("{},node=\"{}\",host=\"{}\",state=\"{}\"", job, n.rank, Esc(n.host),
                           Esc(n.state)),
               n.heartbeat_age_s);
  }
  return w.Take();
}

}  // namespace tandem
