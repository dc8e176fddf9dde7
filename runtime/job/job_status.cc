#include "runtime/job/job_status.h"

#include <algorithm>
#include <optional>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/core/clock.h"
#include "runtime/job/gpu_verdict.h"

namespace tandem {
namespace {

// A side is called the bottleneck's victim when it spends at least this share of its time
// blocked on a channel: below it, waits are noise of a healthy pipeline.
constexpr double kWaitThreshold = 0.2;

bool IsWaitStage(const std::string& name) {
  return name.find("wait") != std::string::npos || name.find("queue_get") != std::string::npos ||
         name.find("pop") != std::string::npos;
}

// Checkpointing's hold on a training loop: "<actor>.checkpoint.snapshot" (copying the state
// out; on a GPU it overlaps training, so this is an upper bound) and "<actor>.checkpoint.wait"
// (the loop blocked on a write). A background write ("...checkpoint.write") blocks nothing
// by itself. Returns the share of wall time and "a 40% + b 4%" naming the stages.
double CheckpointHold(const JobStatus& job, std::string* names) {
  double total = 0;
  for (const auto& st : job.stages) {
    if (!st.name.ends_with(".checkpoint.snapshot") && !st.name.ends_with(".checkpoint.wait"))
      continue;
    if (st.total_s <= 0) continue;
    total += st.total_s;
    *names += fmt::format("{}{} {:.0f}%", names->empty() ? "" : " + ", st.name,
                          100 * st.total_s / job.seconds);
  }
  return total / job.seconds;
}

// Evaluation's hold on a training loop: stages "<actor>.eval" (speculative decoding between
// batches, actors/dflash/drafter_eval.h). Returns the share of wall time, naming the stages.
double EvalHold(const JobStatus& job, std::string* names) {
  double total = 0;
  for (const auto& st : job.stages) {
    if (!st.name.ends_with(".eval") || st.total_s <= 0) continue;
    total += st.total_s;
    *names += fmt::format("{}{} {:.0f}%", names->empty() ? "" : " + ", st.name,
                          100 * st.total_s / job.seconds);
  }
  return total / job.seconds;
}

// "actors", "channels" and "store" of a job's or a node's status.
void PartsToJson(const std::vector<ActorStatus>& actors,
                 const std::vector<ChannelStatus>& channels, const StoreStatus& s,
                 nlohmann::json& out) {
  out["actors"] = nlohmann::json::array();
  for (const auto& a : actors) {
    out["actors"].push_back({{"name", a.name}, {"class", a.class_name}, {"group", a.group},
                             {"replica", a.replica}, {"gpu", a.gpu}, {"state", a.state},
                             {"restarts", a.restarts}, {"max_restarts", a.max_restarts},
                             {"mailbox_depth", a.mailbox_depth},
                             {"messages_done", a.messages_done}, {"stage", a.stage},
                             {"last_error", a.last_error}});
  }
  out["channels"] = nlohmann::json::array();
  for (const auto& c : channels) {
    out["channels"].push_back({{"name", c.name}, {"depth", c.depth}, {"capacity", c.capacity},
                               {"min_ready", c.min_ready}, {"max_depth", c.max_depth},
                               {"pushed", c.pushed}, {"popped", c.popped}, {"closed", c.closed},
                               {"push_wait_s", c.push_wait_s}, {"pop_wait_s", c.pop_wait_s},
                               {"writers", c.writers}, {"readers", c.readers}});
  }
  out["store"] = {{"capacity", s.capacity},         {"used", s.used},
                  {"high_water", s.high_water},     {"objects", s.objects},
                  {"inflight_copies", s.inflight_copies}, {"local_refs", s.local_refs},
                  {"channel_refs", s.channel_refs}, {"holders", s.holders}};
}

nlohmann::json ToJson(const JobStatus& j) {
  nlohmann::json out = {{"id", j.id},
                        {"name", j.name},
                        {"state", j.state},
                        {"error", j.error},
                        {"seconds", j.seconds},
                        {"items_done", j.items_done},
                        {"items_total", j.items_total},
                        {"items_per_s", j.items_per_s},
                        {"verdict", j.verdict},
                        {"profile_table", j.profile_table},
                        {"node", j.node}};
  PartsToJson(j.actors, j.channels, j.store, out);
  out["nodes"] = nlohmann::json::array();
  for (const NodeStatus& n : j.nodes) {
    nlohmann::json o = {{"rank", n.rank}, {"host", n.host}, {"state", n.state},
                        {"heartbeat_age_s", n.heartbeat_age_s}, {"step", n.step},
                        {"report_age_s", n.report_age_s}};
    PartsToJson(n.actors, n.channels, n.store, o);
    out["nodes"].push_back(std::move(o));
  }
  out["stages"] = nlohmann::json::array();
  for (const auto& st : j.stages) {
    out["stages"].push_back({{"name", st.name}, {"count", st.count}, {"total_s", st.total_s},
                             {"mean_ms", st.mean_ms}, {"p50_ms", st.p50_ms},
                             {"p99_ms", st.p99_ms}, {"percent_of_wall", st.percent_of_wall}});
  }
  const TrainingStatus& t = j.training;
  out["training"] = {{"active", t.active}, {"step", t.step}, {"total_steps", t.total_steps},
                     {"steps_per_s", t.steps_per_s}, {"has_metrics", t.has_metrics},
                     {"metrics_step", t.metrics_step}, {"loss", t.loss}, {"acc", t.acc},
                     {"tau", t.tau}, {"tok_s", t.tok_s}};
  const EvalStatus& e = t.eval;
  out["training"]["eval"] = {{"active", e.active}, {"step", e.step}, {"tau", e.tau},
                             {"tok_s", e.tok_s}, {"prompts", e.prompts},
                             {"accept_rate", e.accept_rate}, {"best_step", e.best_step},
                             {"best_tau", e.best_tau}};
  const SelectorMetrics& sel = t.selector;
  out["training"]["selector"] = {{"active", sel.active}, {"loss", sel.loss},
                                 {"recall", sel.recall}, {"accuracy", sel.accuracy}};
  return out;
}

// The actors, channels and store sections of `tandem status`, each line after `indent`.
std::string FormatParts(const std::vector<ActorStatus>& actors,
                        const std::vector<ChannelStatus>& channels, const StoreStatus& s,
                        const std::string& indent) {
  std::string out = indent + "actors:\n";
  out += fmt::format("{}  {:<14} {:<15} {:>3} {:>4} {:<10} {:>8} {:>7} {:<18} {}\n", indent,
                     "NAME", "CLASS", "REP", "GPU", "STATE", "RESTARTS", "MAILBOX", "STAGE",
                     "LAST ERROR");
  for (const auto& a : actors) {
    out += fmt::format("{}  {:<14} {:<15} {:>3} {:>4} {:<10} {:>5}/{:<2} {:>7} {:<18} {}\n",
                       indent, a.name, a.class_name, a.replica,
                       a.gpu < 0 ? std::string("-") : std::to_string(a.gpu), a.state,
                       a.restarts, a.max_restarts, a.mailbox_depth, a.stage, a.last_error);
  }
  out += indent + "channels:\n";
  for (const auto& c : channels) {
    out += fmt::format("{}  {:<14} depth {}/{} (max {}) min_ready {}, pushed {} popped {}, "
                       "push wait {:.3f}s, pop wait {:.3f}s{}\n",
                       indent, c.name, c.depth, c.capacity, c.max_depth, c.min_ready, c.pushed,
                       c.popped, c.push_wait_s, c.pop_wait_s, c.closed ? ", closed" : "");
  }
  out += fmt::format("{}store: {} used of {}, high-water {}, {} objects, {} in-flight copies, "
                     "refs local {} channel {}\n",
                     indent, FormatBytes(s.used), FormatBytes(s.capacity),
                     FormatBytes(s.high_water), s.objects, s.inflight_copies, s.local_refs,
                     s.channel_refs);
  if (!s.holders.empty()) out += indent + "  holders: " + s.holders + "\n";
  return out;
}

std::string Eta(const JobStatus& j) {
  if (j.items_total == 0 || j.items_per_s <= 0 || j.items_done >= j.items_total) return "";
  double s = static_cast<double>(j.items_total - j.items_done) / j.items_per_s;
  return fmt::format(" ETA {:.0f}s", s);
}

}  // namespace

std::string BottleneckVerdict(const JobStatus& job) {
  if (job.seconds <= 0) return "no timings yet";
  std::string largest;
  double largest_pct = 0;
  for (const auto& st : job.stages) {
    // GPU-busy stages overlap each other and the host stages; they enter the GPU check.
    if (IsGpuBusyStage(st.name)) continue;
    if (st.percent_of_wall > largest_pct) {
      largest_pct = st.percent_of_wall;
      largest = st.name;
    }
  }
  std::string stage_note =
      largest.empty() ? "" : fmt::format("; largest stage {} ({:.0f}% of wall{})", largest,
                                         largest_pct, IsWaitStage(largest) ? ", a wait" : "");
  // Actors sharing a GPU: which one's GPU work idles (host waits mislead there).
  if (std::optional<std::string> gpu = SharedGpuVerdict(job, kWaitThreshold))
    return *gpu + stage_note;
  // The worst-waiting side of any channel, as a share of that side's replica-time.
  double worst = 0;
  std::string line;
  for (const auto& c : job.channels) {
    if (c.readers > 0) {
      double share = c.pop_wait_s / (job.seconds * c.readers);
      if (share > worst) {
        worst = share;
        line = fmt::format("consumers wait on producers: {:.0f}% of consumer time blocked "
                           "popping '{}'", 100 * std::min(share, 1.0), c.name);
      }
    }
    if (c.writers > 0) {
      double share = c.push_wait_s / (job.seconds * c.writers);
      if (share > worst) {
        worst = share;
        line = fmt::format("producers wait on consumers: {:.0f}% of producer time blocked "
                           "pushing into full '{}'", 100 * std::min(share, 1.0), c.name);
      }
    }
  }
  // Checkpointing is what blocks when it holds the loop for a large share of the wall and
  // the pipeline does not starve the loop for longer still (then the producers are slower).
  std::string ckpt_names;
  const double ckpt = CheckpointHold(job, &ckpt_names);
  const bool consumers_starve = line.starts_with("consumers wait");
  if (ckpt >= kWaitThreshold && (!consumers_starve || worst < kWaitThreshold || ckpt >= worst)) {
    return fmt::format("checkpointing blocks training: {} of wall in {} (docs/checkpoints.md)"
                       "{}{}", fmt::format("{:.0f}%", 100 * std::min(ckpt, 1.0)), ckpt_names,
                       worst >= kWaitThreshold ? "; " + line : std::string(), stage_note);
  }
  std::string eval_names;
  if (const double eval = EvalHold(job, &eval_names);
      eval >= kWaitThreshold && (!consumers_starve || worst < kWaitThreshold || eval >= worst))
    return fmt::format("evaluation blocks training: {:.0f}% of wall in {} (the drafter's eval: "
                       "raise every_steps or lower max_prompts / max_new_tokens){}{}",
                       100 * std::min(eval, 1.0), eval_names,
                       worst >= kWaitThreshold ? "; " + line : std::string(), stage_note);
  if (worst >= kWaitThreshold) return line + stage_note;
  return fmt::format("balanced: no side waits on a channel more than {:.0f}% of its time{}",
                     100 * kWaitThreshold, stage_note);
}

std::string FormatJobStatus(const JobStatus& j) {
  std::string out = fmt::format("job {} '{}': {} after {:.1f}s, {} items ({:.0f}/s){}\n", j.id,
                                j.name, j.state, j.seconds, j.items_done, j.items_per_s, Eta(j));
  if (const TrainingStatus& t = j.training; t.active) {
    out += fmt::format("training: step {}{}", t.step,
                       t.total_steps ? fmt::format("/{}", t.total_steps) : "");
    if (t.has_metrics)
      out += fmt::format(", at step {}: loss {:.4f} acc {:.3f} tau {:.2f}, {:.0f} tok/s",
                         t.metrics_step, t.loss, t.acc, t.tau, t.tok_s);
    if (t.has_metrics && t.selector.active)
      out += fmt::format(", selector loss {:.4f} recall {:.3f} acc {:.3f}", t.selector.loss,
                         t.selector.recall, t.selector.accuracy);
    out += "\n";
    if (const EvalStatus& e = t.eval; e.active) {
      std::string rates;
      for (double r : e.accept_rate) rates += fmt::format("{}{:.2f}", rates.empty() ? "" : " ", r);
      out += fmt::format("eval: at step {}: tau {:.3f} (best {:.3f} at step {}), {} prompts, "
                         "{:.1f} tok/s decoding; accepted by draft position: {}\n",
                         e.step, e.tau, e.best_tau, e.best_step, e.prompts, e.tok_s,
                         rates.empty() ? "-" : rates);
    }
  }
  if (!j.error.empty()) out += fmt::format("error: {}\n", j.error);
  out += fmt::format("verdict: {}\n\n", j.verdict);
  if (j.nodes.empty()) {
    out += FormatParts(j.actors, j.channels, j.store, "");
  } else {
    // At the head of a job on several nodes: each node's health, then its parts.
    for (const NodeStatus& n : j.nodes) {
      out += fmt::format("node {} ({}): {}, heartbeat {:.1f}s ago, step {}", n.rank, n.host,
                         n.state, n.heartbeat_age_s, n.step);
      out += n.report_age_s < 0 ? ", no report yet\n"
                                : fmt::format(", reported {:.1f}s ago\n", n.report_age_s);
      out += FormatParts(n.actors, n.channels, n.store, "  ");
    }
  }
  if (!j.profile_table.empty()) out += "\n" + j.profile_table;
  return out;
}

std::string FormatJobList(const std::vector<JobStatus>& jobs) {
  std::string out = fmt::format("{:<6} {:<20} {:<10} {:>9} {:>10} {:>9}\n", "ID", "NAME", "STATE",
                                "SECONDS", "ITEMS", "ITEMS/S");
  for (const auto& j : jobs) {
    out += fmt::format("{:<6} {:<20} {:<10} {:>9.1f} {:>10} {:>9.0f}\n", j.id, j.name, j.state,
                       j.seconds, j.items_done, j.items_per_s);
  }
  return out;
}

std::string FormatActorList(const std::vector<JobStatus>& jobs) {
  std::string out = fmt::format("{:<6} {:<14} {:<15} {:<10} {:>8} {}\n", "JOB", "ACTOR", "CLASS",
                                "STATE", "RESTARTS", "STAGE");
  for (const auto& j : jobs)
    for (const auto& a : j.actors)
      out += fmt::format("{:<6} {:<14} {:<15} {:<10} {:>8} {}\n", j.id, a.name, a.class_name,
                         a.state, a.restarts, a.stage);
  return out;
}

std::string JobStatusToJson(const JobStatus& job, int indent) { return ToJson(job).dump(indent); }

std::string JobListToJson(const std::vector<JobStatus>& jobs, int indent) {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& j : jobs) arr.push_back(ToJson(j));
  return arr.dump(indent);
}

}  // namespace tandem
