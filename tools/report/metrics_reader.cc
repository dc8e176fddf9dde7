#include "tools/report/metrics_reader.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "runtime/core/json_parse.h"

namespace tandem::report {
namespace {

using nlohmann::json;

constexpr int kKnownSchema = 1;

double Num(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : NAN;
}

// `v` as an integer (truncated), or nullopt when it is not finite or beyond int64's range:
// converting such a double is undefined behaviour.
std::optional<int64_t> Int64(double v) {
  if (!std::isfinite(v) || v < -0x1p63 || v >= 0x1p63) return std::nullopt;
  return static_cast<int64_t>(v);
}

std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

class Parser {
 public:
  explicit Parser(std::string path) { run_.path = std::move(path); }

  void Line(const std::string& text, int line_no) {
    if (text.find_first_not_of(" \t\r") == std::string::npos) return;
    Result<json> parsed = ParseJson(text, "");
    if (!parsed.ok() || !parsed->is_object()) {
      Warn(line_no, "not a valid JSON object (truncated, corrupt or nested too deep)");
      return;
    }
    const json& j = *parsed;
    std::string kind = Str(j, "kind");
    if (kind.empty() && j.contains("step") && j.contains("loss")) kind = "train";  // schema 0
    if (kind == "header") return Header(j, line_no);
    if (kind == "train") return Train(j, line_no);
    if (kind == "sample") return Sample(j);
    if (kind == "end") {
      run_.end_state = Str(j, "state");
      run_.end_error = Str(j, "error");
      return;
    }
    if (unknown_kinds_.insert(kind).second)
      Warn(line_no, fmt::format("record kind '{}' is not known to this reader (schema {})", kind,
                                kKnownSchema));
  }

  Result<RunData> Finish() {
    std::vector<TrainRow>& t = run_.train;
    // A step logged twice (a restart redid it) keeps the later record.
    std::stable_sort(t.begin(), t.end(), [](const TrainRow& a, const TrainRow& b) {
      return a.step < b.step;
    });
    std::vector<TrainRow> unique;
    for (const TrainRow& r : t) {
      if (!unique.empty() && unique.back().step == r.step) unique.back() = r;
      else unique.push_back(r);
    }
    t = std::move(unique);
    if (run_.train.empty() && run_.samples.empty())
      return InvalidArgumentError("{}: no metrics in it ({} lines, no training or sample "
                                  "records); was the job run with a metrics file or a "
                                  "checkpoint dir?", run_.path, run_.lines);
    return std::move(run_);
  }

  void set_lines(int n) { run_.lines = n; }

 private:
  void Warn(int line_no, const std::string& what) {
    run_.warnings.push_back(fmt::format("{}:{}: {}; skipped", run_.path, line_no, what));
  }

  void Header(const json& j, int line_no) {
    // A later header starts a resumed segment: its clock continues from the last time seen.
    offset_ = last_t_;
    const double schema = Num(j, "schema");
    run_.schema = std::isfinite(schema) ? static_cast<int>(std::clamp(schema, -1e9, 1e9)) : 0;
    if (run_.schema > kKnownSchema)
      run_.warnings.push_back(fmt::format("{}:{}: written with metrics schema {}; this reader "
                                          "knows {} and reads what it can", run_.path, line_no,
                                          run_.schema, kKnownSchema));
    run_.job_name = Str(j, "job");
    run_.job_file = Str(j, "file");
    run_.started_unix = Num(j, "started_unix");
    run_.settings.clear();
    auto s = j.find("settings");
    if (s == j.end() || !s->is_object()) return;
    std::vector<std::string> order;
    if (auto o = j.find("settings_order"); o != j.end() && o->is_array())
      for (const json& k : *o)
        if (k.is_string() && s->contains(k.get<std::string>())) order.push_back(k);
    if (order.empty())
      for (auto it = s->begin(); it != s->end(); ++it) order.push_back(it.key());
    for (const std::string& k : order) {
      const json& v = (*s)[k];
      run_.settings.emplace_back(k, v.is_string() ? v.get<std::string>() : DescribeJson(v));
    }
  }

  double Time(const json& j) {
    double t = Num(j, "t");
    t = std::isfinite(t) ? t + offset_ : last_t_;
    last_t_ = std::max(last_t_, t);
    return t;
  }

  void Train(const json& j, int line_no) {
    const std::optional<int64_t> step = Int64(Num(j, "step"));
    if (!step) return Warn(line_no, "a train record without a numeric 'step' in int64's range");
    const std::string actor = Str(j, "actor");
    if (run_.train_actor.empty()) run_.train_actor = actor.empty() ? "-" : actor;
    if (!actor.empty() && actor != run_.train_actor) return;  // other replicas: not plotted
    TrainRow r;
    r.t = Time(j);
    r.step = *step;
    r.total_steps = Int64(Num(j, "total_steps")).value_or(0);
    r.loss = Num(j, "loss");
    r.acc = Num(j, "acc");
    r.tau = Num(j, "tau");
    r.grad_norm = Num(j, "grad_norm");
    r.lr = Num(j, "lr");
    r.tok_s = Num(j, "tok_s");
    r.sel_loss = Num(j, "sel_loss");
    r.cand_recall = Num(j, "cand_recall");
    r.sel_acc = Num(j, "sel_acc");
    run_.train.push_back(r);
  }

  void Sample(const json& j) {
    SampleRow r;
    r.t = Time(j);
    r.window_s = Num(j, "window_s");
    if (auto s = j.find("store"); s != j.end() && s->is_object()) {
      r.store_used = Num(*s, "used");
      r.store_high_water = Num(*s, "high_water");
      r.store_capacity = Num(*s, "capacity");
    }
    if (auto st = j.find("stages"); st != j.end() && st->is_object())
      for (auto it = st->begin(); it != st->end(); ++it)
        if (it->is_object()) r.stage_seconds[it.key()] = Num(*it, "seconds");
    if (auto ch = j.find("channels"); ch != j.end() && ch->is_object())
      for (auto it = ch->begin(); it != ch->end(); ++it)
        if (it->is_object()) r.channel_depth[it.key()] = Num(*it, "depth");
    run_.samples.push_back(std::move(r));
  }

  RunData run_;
  double offset_ = 0;
  double last_t_ = 0;
  std::set<std::string> unknown_kinds_;
};

}  // namespace

Result<std::string> ResolveMetricsPath(const std::string& run) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_regular_file(run, ec)) return run;
  if (!fs::exists(run, ec)) return NotFoundError("{}: no such file or directory", run);
  if (!fs::is_directory(run, ec))
    return InvalidArgumentError("{}: not a metrics file or a run directory (a device, pipe or "
                                "socket); give the run's checkpoint dir or its metrics.jsonl",
                                run);
  const fs::path dir(run);
  for (const fs::path& p : {dir / "metrics.jsonl", dir.parent_path() / "metrics.jsonl"})
    if (fs::is_regular_file(p, ec)) return p.string();
  return NotFoundError("{}: no metrics file in it (looked for {}/metrics.jsonl and its "
                       "parent's); run the job with a checkpoint dir or metrics_file", run,
                       run);
}

Result<RunData> ParseMetrics(const std::string& text, const std::string& path) {
  Parser p(path);
  std::istringstream in(text);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) p.Line(line, ++n);
  p.set_lines(n);
  return p.Finish();
}

Result<RunData> ReadRun(const std::string& run) {
  ASSIGN_OR_RETURN(std::string path, ResolveMetricsPath(run));
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFoundError("{}: cannot be read", path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ParseMetrics(ss.str(), path);
}

}  // namespace tandem::report
