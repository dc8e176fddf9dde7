#include "runtime/job/job_metrics.h"

#include <chrono>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/core/logging.h"

namespace tandem {
namespace {

// Keys in the order written ("kind" and "t" first), for people reading the file.
using Json = nlohmann::ordered_json;

// JSON has no NaN or Inf: a non-finite number is written as null (the report skips it).
Json Num(double v) { return std::isfinite(v) ? Json(v) : Json(); }

void Flatten(const std::string& prefix, const ConfigValue& v,
             std::vector<std::pair<std::string, std::string>>* out) {
  if (v.is_table()) {
    for (const auto& [k, child] : v.table()) Flatten(prefix.empty() ? k : prefix + "." + k, child, out);
    return;
  }
  if (auto s = v.AsString(); s.ok()) {
    out->emplace_back(prefix, *s);
  } else {
    out->emplace_back(prefix, v.ToString());
  }
}

}  // namespace

std::vector<std::pair<std::string, std::string>> FlattenJobSettings(const JobSpec& job) {
  std::vector<std::pair<std::string, std::string>> out;
  out.emplace_back("job.name", job.name);
  out.emplace_back("job.seed", std::to_string(job.seed));
  out.emplace_back("store.capacity", FormatBytes(static_cast<uint64_t>(job.store_bytes)));
  if (job.profile_interval_s > 0)
    out.emplace_back("profile.interval_s", fmt::format("{}", job.profile_interval_s));
  for (const auto& c : job.channels) {
    out.emplace_back(fmt::format("channels.{}.capacity", c.name), std::to_string(c.capacity));
    out.emplace_back(fmt::format("channels.{}.min_ready", c.name), std::to_string(c.min_ready));
  }
  for (const auto& g : job.actors) Flatten("actors." + g.name, g.settings, &out);
  return out;
}

Status JobMetrics::OpenFile(const std::string& path, bool append) {
  std::lock_guard lock(mu_);
  if (!path_.empty()) {
    if (path == path_) return Status::Ok();
    return InvalidArgumentError("metrics file: the job already writes {}; a second file {} "
                                "is not supported", path_, path);
  }
  std::error_code ec;
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  file_.open(path, append ? std::ios::app : std::ios::trunc);
  if (!file_) return NotFoundError("metrics file {}: cannot open it for writing", path);
  path_ = path;
  Json settings = Json::object();
  Json order = Json::array();
  if (job_ != nullptr) {
    for (auto& [k, v] : FlattenJobSettings(*job_)) {
      settings[k] = v;
      order.push_back(k);
    }
  }
  const auto unix_s = std::chrono::duration<double>(
      std::chrono::system_clock::now().time_since_epoch()).count();
  Json h = {{"kind", "header"}, {"t", Now()}, {"schema", kMetricsSchemaVersion},
                      {"job", job_ ? job_->name : ""},
                      {"file", job_ ? job_->path : ""}, {"started_unix", unix_s},
                      {"sample_seconds", kMetricsSampleSeconds},
                      {"settings", settings}, {"settings_order", order}};
  WriteLine(h.dump());
  return Status::Ok();
}

std::string JobMetrics::path() const {
  std::lock_guard lock(mu_);
  return path_;
}

void JobMetrics::WriteLine(const std::string& line) {
  if (!file_.is_open() || write_failed_) return;
  file_ << line << '\n' << std::flush;
  if (!file_) {
    write_failed_ = true;  // once: a full disk must not flood the log
    TLOG_WARN("metrics file {}: write failed; no more records go there", path_);
  }
}

void JobMetrics::SetStep(const std::string& actor, int64_t step, int64_t total_steps) {
  std::lock_guard lock(mu_);
  ActorProgress& a = actors_[actor];
  const TimePoint now = SteadyClock::now();
  if (a.first_step < 0) {
    a.first_step = step;
    a.first_time = now;
  }
  a.step = step;
  a.total = total_steps;
  a.last_time = now;
}

void JobMetrics::Record(const std::string& actor, const TrainPoint& p) {
  std::lock_guard lock(mu_);
  ActorProgress& a = actors_[actor];
  a.has_point = true;
  a.point = p;
  // Written by hand to keep the `"key": value` layout older tools grep for.
  std::string selector;
  if (p.selector.active)
    selector = fmt::format(R"(, "sel_loss": {}, "cand_recall": {}, "sel_acc": {})",
                           Num(p.selector.loss).dump(), Num(p.selector.recall).dump(),
                           Num(p.selector.accuracy).dump());
  WriteLine(fmt::format(
      R"({{"kind": "train", "t": {:.3f}, "actor": {}, "step": {}, "total_steps": {}, )"
      R"("loss": {}, "acc": {}, "tau": {}, "grad_norm": {}, "lr": {}, "tok_s": {}{}}})",
      Now(), Json(actor).dump(), p.step, p.total_steps, Num(p.loss).dump(), Num(p.acc).dump(),
      Num(p.tau).dump(), Num(p.grad_norm).dump(), Num(p.lr).dump(), Num(p.tok_s).dump(),
      selector));
}

void JobMetrics::RecordEval(const std::string& actor, const EvalPoint& p) {
  std::lock_guard lock(mu_);
  ActorProgress& a = actors_[actor];
  a.has_eval = true;
  a.eval = p;
  Json rates = Json::array();
  for (double r : p.accept_rate) rates.push_back(Num(r));
  Json j = {{"kind", "eval"},
            {"t", Now()},
            {"actor", actor},
            {"step", p.step},
            {"tau", Num(p.tau)},
            {"accept_rate", rates},
            {"tok_s", Num(p.tok_s)},
            {"prompts", p.prompts},
            {"tokens", p.tokens},
            {"verify_steps", p.verify_steps},
            {"seconds", Num(p.seconds)},
            {"block_size", p.block_size},
            {"temperature", Num(p.temperature)},
            {"best", p.best},
            {"best_step", p.best_step},
            {"best_tau", Num(p.best_tau)}};
  WriteLine(j.dump());
}

void JobMetrics::Sample(const StoreStats& store, const std::vector<ChannelStats>& channels,
                        const ProfileSnapshot& profile, uint64_t items_done) {
  std::lock_guard lock(mu_);
  if (!file_.is_open()) return;
  const double t = Now();
  Json stages = Json::object();
  for (const StageReport& r : profile.stages) {
    int64_t& last = last_stage_ns_[r.name];
    stages[r.name] = {{"seconds", (r.cumulative.total_ns - last) * 1e-9},
                      {"total_s", r.cumulative.total_ns * 1e-9},
                      {"count", r.cumulative.count},
                      {"p99_ms", r.cumulative.p99_ns * 1e-6}};
    last = r.cumulative.total_ns;
  }
  Json chans = Json::object();
  for (const ChannelStats& c : channels)
    chans[c.name] = {{"depth", c.depth}, {"capacity", c.capacity}, {"max_depth", c.max_depth},
                     {"popped", c.total_popped}};
  Json j = {{"kind", "sample"},
                      {"t", t},
                      {"window_s", t - last_sample_t_},
                      {"items_done", items_done},
                      {"store", {{"used", store.bytes_used}, {"high_water", store.high_water},
                                 {"capacity", store.capacity}, {"objects", store.live_objects}}},
                      {"channels", chans},
                      {"stages", stages}};
  last_sample_t_ = t;
  WriteLine(j.dump());
}

void JobMetrics::End(const std::string& state, const std::string& error) {
  std::lock_guard lock(mu_);
  WriteLine(Json({{"kind", "end"}, {"t", Now()}, {"state", state}, {"error", error}})
                .dump());
}

TrainingStatus JobMetrics::Training() const {
  std::lock_guard lock(mu_);
  TrainingStatus t;
  if (actors_.empty()) return t;
  t.active = true;
  t.step = INT64_MAX;
  int n = 0;
  for (const auto& [name, a] : actors_) {
    t.step = std::min(t.step, a.step);
    t.total_steps = std::max(t.total_steps, a.total);
    const double secs = std::chrono::duration<double>(a.last_time - a.first_time).count();
    const double rate = secs > 0 ? (a.step - a.first_step) / secs : 0;
    t.steps_per_s = n == 0 ? rate : std::min(t.steps_per_s, rate);
    ++n;
  }
  for (const auto& [name, a] : actors_) {  // one replica evaluates: its latest
    if (!a.has_eval || (t.eval.active && a.eval.step < t.eval.step)) continue;
    t.eval = {true, a.eval.step, a.eval.tau, a.eval.tok_s, a.eval.prompts, a.eval.accept_rate,
              a.eval.best_step, a.eval.best_tau};
  }
  int m = 0, ms = 0;
  for (const auto& [name, a] : actors_) {
    if (!a.has_point) continue;
    t.has_metrics = true;
    t.metrics_step = std::max(t.metrics_step, a.point.step);
    t.loss += a.point.loss;
    t.acc += a.point.acc;
    t.tau += a.point.tau;
    t.tok_s += a.point.tok_s;  // replicas train side by side: their rates add up
    ++m;
    if (const SelectorMetrics& s = a.point.selector; s.active) {
      t.selector.active = true;
      t.selector.loss += s.loss;
      t.selector.recall += s.recall;
      t.selector.accuracy += s.accuracy;
      ++ms;
    }
  }
  if (m > 0) {
    t.loss /= m;
    t.acc /= m;
    t.tau /= m;
  }
  if (ms > 0) {
    t.selector.loss /= ms;
    t.selector.recall /= ms;
    t.selector.accuracy /= ms;
  }
  return t;
}

}  // namespace tandem
