#include "tools/report/html_report.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <functional>
#include <optional>
#include <filesystem>
#include <fstream>
#include <map>

#include <fmt/format.h>

#include "tools/report/report_charts.h"
#include "tools/report/svg_chart.h"

namespace tandem::report {
namespace {

constexpr size_t kMaxWarningsShown = 20;

constexpr const char* kStyle = R"(
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:24px auto;max-width:1560px;
color:#222;background:#fafafa}
h1{font-size:22px;margin:0 0 4px}h2{font-size:17px;margin:28px 0 8px}
.sub{color:#555;font-size:13px;margin-bottom:12px}
table{border-collapse:collapse;font-size:13px;background:#fff}
td,th{border:1px solid #ddd;padding:3px 8px;text-align:left}th{background:#f0f0f0}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.diff td{background:#fff6d5}
.warnings{background:#fff3f3;border:1px solid #e0a0a0;padding:8px 12px;font-size:13px}
.charts{display:flex;flex-wrap:wrap;gap:12px}
figure{margin:0;background:#fff;border:1px solid #ddd;padding:6px}
svg.chart .title{font-size:14px;font-weight:600}
svg.chart .tick{font-size:11px;fill:#444}
svg.chart .axis-label{font-size:12px;fill:#222}
svg.chart .grid{stroke:#e6e6e6}svg.chart .tickmark{stroke:#888}
svg.chart .frame{fill:none;stroke:#888}
.legend{font-size:12px;padding:2px 0 0 70px;max-width:680px}
.legend span{margin-right:14px;white-space:nowrap}
.legend i{display:inline-block;width:12px;height:9px;margin-right:4px}
)";

std::string Fixed(double v, int digits) {
  return std::isfinite(v) ? fmt::format("{:.{}f}", v, digits) : "-";
}

std::string UtcTime(double unix_s) {
  if (!std::isfinite(unix_s) || unix_s <= 0) return "unknown";
  std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

// One summary value per run; data-key lets the test find it.
struct SummaryRow {
  const char* key;
  const char* label;
  std::function<std::string(const RunData&)> value;
};

std::string Summary(const std::vector<const RunData*>& runs) {
  auto last = [](const RunData& r) -> const TrainRow* {
    return r.train.empty() ? nullptr : &r.train.back();
  };
  std::vector<SummaryRow> rows = {
      {"steps", "steps logged (last / total)", [&](const RunData& r) {
         const TrainRow* t = last(r);
         return t ? fmt::format("{} / {}", t->step, t->total_steps) : std::string("-");
       }},
      {"train_records", "training records", [](const RunData& r) { return std::to_string(r.train.size()); }},
      {"final_loss", "last loss (nats)", [&](const RunData& r) { return last(r) ? Fixed(last(r)->loss, 4) : "-"; }},
      {"final_acc", "last accuracy", [&](const RunData& r) { return last(r) ? Fixed(last(r)->acc, 4) : "-"; }},
      {"final_tau", "last \u03c4", [&](const RunData& r) { return last(r) ? Fixed(last(r)->tau, 3) : "-"; }},
      {"final_tok_s", "last tok/s", [&](const RunData& r) { return last(r) ? Fixed(last(r)->tok_s, 1) : "-"; }},
      {"duration_s", "time covered (s)", [](const RunData& r) {
         double t = 0;
         if (!r.train.empty()) t = std::max(t, r.train.back().t);
         if (!r.samples.empty()) t = std::max(t, r.samples.back().t);
         return Fixed(t, 1);
       }},
      {"store_high_water_mib", "store high-water (MiB)", [](const RunData& r) {
         double hw = NAN;
         for (const SampleRow& s : r.samples)
           if (std::isfinite(s.store_high_water)) hw = std::isfinite(hw) ? std::max(hw, s.store_high_water) : s.store_high_water;
         return Fixed(hw / (1024.0 * 1024.0), 2);
       }},
      {"samples", "store/profile samples", [](const RunData& r) { return std::to_string(r.samples.size()); }},
      {"end_state", "ended", [](const RunData& r) {
         return r.end_state.empty() ? std::string("no end record (running, or killed)")
                                    : r.end_state + (r.end_error.empty() ? "" : ": " + r.end_error);
       }},
  };
  std::string s = "<table class=\"summary\"><tr><th></th>";
  for (size_t i = 0; i < runs.size(); ++i) s += "<th>" + Escape(RunLabel(*runs[i], i)) + "</th>";
  s += "</tr>\n";
  for (const SummaryRow& row : rows) {
    s += fmt::format("<tr><th>{}</th>", Escape(row.label));
    for (size_t i = 0; i < runs.size(); ++i)
      s += fmt::format(R"(<td class="num" data-run="{}" data-key="{}">{}</td>)", i, row.key,
                       Escape(row.value(*runs[i])));
    s += "</tr>\n";
  }
  return s + "</table>\n";
}

std::string Settings(const std::vector<const RunData*>& runs) {
  std::vector<std::string> keys;
  std::vector<std::map<std::string, std::string>> values(runs.size());
  for (size_t i = 0; i < runs.size(); ++i)
    for (const auto& [k, v] : runs[i]->settings) {
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
      values[i][k] = v;
    }
  if (keys.empty()) return "<p>No settings recorded (the file has no header).</p>\n";
  std::string s = "<table class=\"settings\"><tr><th>setting</th>";
  for (size_t i = 0; i < runs.size(); ++i) s += "<th>" + Escape(RunLabel(*runs[i], i)) + "</th>";
  s += "</tr>\n";
  for (const std::string& k : keys) {
    bool differs = false;
    for (size_t i = 1; i < runs.size(); ++i) differs |= values[i][k] != values[0][k];
    s += fmt::format("<tr{}><td>{}</td>", differs ? " class=\"diff\"" : "", Escape(k));
    for (size_t i = 0; i < runs.size(); ++i) {
      auto it = values[i].find(k);
      s += "<td>" + Escape(it == values[i].end() ? "(unset)" : it->second) + "</td>";
    }
    s += "</tr>\n";
  }
  return s + "</table>\n";
}

std::string Warnings(const std::vector<const RunData*>& runs) {
  std::vector<std::string> all;
  for (const RunData* r : runs) all.insert(all.end(), r->warnings.begin(), r->warnings.end());
  if (all.empty()) return "";
  std::string s = fmt::format("<div class=\"warnings\"><b>{} warning{}</b> (the report shows "
                              "what could be read):<ul>\n", all.size(), all.size() == 1 ? "" : "s");
  for (size_t i = 0; i < all.size() && i < kMaxWarningsShown; ++i)
    s += "<li class=\"warning\">" + Escape(all[i]) + "</li>\n";
  if (all.size() > kMaxWarningsShown)
    s += fmt::format("<li>... and {} more</li>\n", all.size() - kMaxWarningsShown);
  return s + "</ul></div>\n";
}

std::string Figure(const Chart& c, bool stacked) {
  return "<figure>" + (stacked ? StackedChartSvg(c) : LineChartSvg(c)) + LegendHtml(c) +
         "</figure>\n";
}

}  // namespace

std::string RenderReport(const RunData& run, const RunData* compare) {
  std::vector<const RunData*> runs = {&run};
  if (compare != nullptr) runs.push_back(compare);
  const std::string name = run.job_name.empty() ? "run" : run.job_name;
  std::string h = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
      "<title>tandem report: {}</title>\n<style>{}</style></head><body>\n"
      "<h1>tandem report: {}{}</h1>\n",
      Escape(name), kStyle, Escape(name),
      compare ? " vs " + Escape(compare->job_name.empty() ? "run" : compare->job_name) : "");
  for (size_t i = 0; i < runs.size(); ++i)
    h += fmt::format("<div class=\"sub\">{}: {} &middot; job file {} &middot; started {} "
                     "&middot; metrics schema {} &middot; {} lines</div>\n",
                     Escape(RunLabel(*runs[i], i)), Escape(runs[i]->path),
                     Escape(runs[i]->job_file.empty() ? "unknown" : runs[i]->job_file),
                     UtcTime(runs[i]->started_unix), runs[i]->schema, runs[i]->lines);
  h += Warnings(runs);
  h += "<h2>Summary</h2>\n" + Summary(runs);
  h += "<h2>Training and throughput</h2>\n<div class=\"charts\">\n";
  for (const Chart& c : LineCharts(runs)) h += Figure(c, false);
  h += "</div>\n<h2>Where the time goes</h2>\n<div class=\"charts\">\n";
  for (size_t i = 0; i < runs.size(); ++i) {
    Chart c = ProfileChart(*runs[i], i == 0 ? "profile" : "profile_b");
    if (compare != nullptr) c.title += " \u2014 " + RunLabel(*runs[i], i);
    if (c.series.empty()) {
      h += "<p>No profile samples in " + Escape(runs[i]->path) + ".</p>\n";
      continue;
    }
    h += Figure(c, true);
  }
  h += "</div>\n<h2>Settings</h2>\n" + Settings(runs);
  h += "</body></html>\n";
  return h;
}

Result<std::string> WriteReport(const std::string& run, const std::string& compare,
                                const std::string& out, std::vector<std::string>* warnings) {
  ASSIGN_OR_RETURN(RunData a, ReadRun(run));
  std::optional<RunData> b;
  if (!compare.empty()) {
    ASSIGN_OR_RETURN(RunData rb, ReadRun(compare));
    b = std::move(rb);
  }
  for (const RunData* r : {&a, b ? &*b : nullptr})
    if (r != nullptr) warnings->insert(warnings->end(), r->warnings.begin(), r->warnings.end());
  std::string path = out;
  if (path.empty()) {
    std::filesystem::path m(a.path);
    path = m.filename() == "metrics.jsonl" ? (m.parent_path() / "report.html").string()
                                           : m.replace_extension(".html").string();
  }
  std::ofstream f(path, std::ios::trunc);
  if (!f) return NotFoundError("{}: cannot write the report there", path);
  f << RenderReport(a, b ? &*b : nullptr);
  f.close();
  if (!f) return InternalError("{}: writing the report failed", path);
  return path;
}

}  // namespace tandem::report
