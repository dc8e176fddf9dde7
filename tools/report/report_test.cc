// `tandem report` from a fixed metrics file (testdata/run.jsonl): the page has every chart,
// each series has one point per record of the file, the numbers shown are the file's, the
// page is self-contained; a corrupt or truncated file gives what is readable plus warnings
// naming the lines; no metrics is a clear error.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "tools/report/html_report.h"
#include "tools/report/metrics_reader.h"
#include "tools/report/svg_axes.h"
#include "tests/support/scratch_dir.h"

namespace tandem::report {
namespace {

const std::string kFixture = std::string(TANDEM_REPORT_TESTDATA) + "/run.jsonl";

std::string ReadText(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The records of `kind` in the fixture, parsed independently of the reader under test.
std::vector<nlohmann::json> Records(const std::string& text, const std::string& kind) {
  std::vector<nlohmann::json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.value("kind", "") == kind) out.push_back(j);
  }
  return out;
}

// The opening tag of the chart with data-chart=`id` up to its </svg>.
std::string ChartSvg(const std::string& html, const std::string& id) {
  const size_t at = html.find(fmt::format("data-chart=\"{}\"", id));
  if (at == std::string::npos) return "";
  return html.substr(at, html.find("</svg>", at) - at);
}

// data-points of every element of `cls` (polyline series or polygon layers) in `svg`.
std::vector<int> Points(const std::string& svg, const std::string& cls) {
  std::vector<int> out;
  std::regex re("class=\"" + cls + "\" data-series=\"[^\"]*\" data-points=\"([0-9]+)\"");
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), re); it != std::sregex_iterator(); ++it)
    out.push_back(std::stoi((*it)[1]));
  return out;
}

std::string Cell(const std::string& html, const std::string& key, int run = 0) {
  std::smatch m;
  std::regex re(fmt::format("data-run=\"{}\" data-key=\"{}\">([^<]*)<", run, key));
  return std::regex_search(html, m, re) ? m[1].str() : "<missing>";
}

TEST(ReportTest, ChartsSeriesAndNumbersMatchTheFile) {
  const std::string text = ReadText(kFixture);
  const auto train = Records(text, "train"), samples = Records(text, "sample");
  ASSERT_EQ(train.size(), 12u);
  ASSERT_EQ(samples.size(), 8u);
  auto run = ParseMetrics(text, "run.jsonl");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_TRUE(run->warnings.empty()) << run->warnings.front();
  const std::string html = RenderReport(*run, nullptr);
  for (const char* id : {"loss", "acc", "tau", "tok_s"})
    EXPECT_EQ(Points(ChartSvg(html, id), "series"), std::vector<int>{12}) << id;
  // Store: used and high-water, one point per sample each.
  EXPECT_EQ(Points(ChartSvg(html, "store"), "series"), (std::vector<int>{8, 8}));
  EXPECT_EQ(Points(ChartSvg(html, "channel_hidden"), "series"), std::vector<int>{8});
  // The stacked profile: one layer per stage, one point per sample.
  EXPECT_EQ(Points(ChartSvg(html, "profile"), "layer"), (std::vector<int>{8, 8, 8}));
  for (const char* stage : {"target.forward", "drafter.forward_backward", "drafter.queue_get"})
    EXPECT_NE(ChartSvg(html, "profile").find(fmt::format("data-series=\"{}\"", stage)),
              std::string::npos) << stage;
  // Axes carry units.
  EXPECT_NE(html.find("loss (nats per token)"), std::string::npos);
  EXPECT_NE(html.find("time since start (s)"), std::string::npos);
  EXPECT_NE(html.find("store (MiB)"), std::string::npos);
  // The numbers shown are the file's.
  const nlohmann::json& last = train.back();
  EXPECT_EQ(Cell(html, "final_loss"), fmt::format("{:.4f}", last["loss"].get<double>()));
  EXPECT_EQ(Cell(html, "final_tau"), fmt::format("{:.3f}", last["tau"].get<double>()));
  EXPECT_EQ(Cell(html, "final_acc"), fmt::format("{:.4f}", last["acc"].get<double>()));
  EXPECT_EQ(Cell(html, "steps"), fmt::format("{} / {}", last["step"].get<int>(),
                                             last["total_steps"].get<int>()));
  EXPECT_EQ(Cell(html, "train_records"), "12");
  double hw = 0;
  for (const auto& s : samples) hw = std::max(hw, s["store"]["high_water"].get<double>());
  EXPECT_EQ(Cell(html, "store_high_water_mib"), fmt::format("{:.2f}", hw / 1048576));
  EXPECT_EQ(Cell(html, "end_state"), "succeeded");
  // The settings table shows the header's settings.
  EXPECT_NE(html.find("<td>actors.drafter.lr</td><td>0.003</td>"), std::string::npos);
  // Self-contained: no script, no external resource.
  for (const char* banned : {"<script", "src=", "href=", "url(", "@import"})
    EXPECT_EQ(html.find(banned), std::string::npos) << banned;
}

TEST(ReportTest, CompareOverlaysTheSecondRunDashed) {
  const std::string text = ReadText(kFixture);
  auto a = ParseMetrics(text, "a/metrics.jsonl");
  // Run B: the first 7 training records only (a shorter run).
  std::string btext;
  std::istringstream in(text);
  int trains = 0;
  for (std::string line; std::getline(in, line);)
    if (line.find("\"train\"") == std::string::npos || ++trains <= 7) btext += line + "\n";
  auto b = ParseMetrics(btext, "b/metrics.jsonl");
  ASSERT_TRUE(a.ok() && b.ok());
  const std::string html = RenderReport(*a, &*b);
  const std::string loss = ChartSvg(html, "loss");
  EXPECT_EQ(Points(loss, "series"), (std::vector<int>{12, 7}));
  EXPECT_NE(loss.find("stroke-dasharray"), std::string::npos);
  EXPECT_FALSE(ChartSvg(html, "profile_b").empty());
  EXPECT_EQ(Cell(html, "train_records", 1), "7");
}

TEST(ReportTest, CorruptAndTruncatedLinesAreSkippedWithWarningsNamingThem) {
  std::vector<std::string> lines;
  {
    std::istringstream in(ReadText(kFixture));
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  // Line 4 (a train record) becomes garbage; the last line (the end record) is cut short.
  ASSERT_NE(lines[3].find("\"train\""), std::string::npos);
  lines[3] = "{\"kind\": \"train\", \"st\x01\xff";
  lines.back() = lines.back().substr(0, lines.back().size() / 2);
  std::string text;
  for (const auto& l : lines) text += l + "\n";
  text.pop_back();
  auto run = ParseMetrics(text, "run.jsonl");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->warnings.size(), 2u);
  EXPECT_NE(run->warnings[0].find("run.jsonl:4:"), std::string::npos) << run->warnings[0];
  EXPECT_NE(run->warnings[1].find(fmt::format("run.jsonl:{}:", lines.size())), std::string::npos)
      << run->warnings[1];
  const std::string html = RenderReport(*run, nullptr);
  EXPECT_EQ(Points(ChartSvg(html, "loss"), "series"), std::vector<int>{11});
  EXPECT_NE(html.find("run.jsonl:4:"), std::string::npos);
  EXPECT_NE(Cell(html, "end_state").find("no end record"), std::string::npos);
}

TEST(ReportTest, TicksAreBoundedWhenValuesDifferByLessThanAStep) {
  // 1e17 and 1e17 + 16 are one ulp apart: a tick step below the ulp never advanced, and the
  // tick list grew until memory ran out.
  for (Range r : {Range{1e17, 1e17 + 16}, Range{1e17, 1e17}, Range{-3e300, 1.7e308},
                  Range{0, 0}, Range{5e-324, 1e-323}, Range{NAN, INFINITY}, Range{2, 1}}) {
    SCOPED_TRACE(fmt::format("[{}, {}]", r.lo, r.hi));
    const double lo = r.lo, hi = r.hi;
    std::vector<double> t = NiceTicks(&r, 5);
    ASSERT_GE(t.size(), 2u);
    EXPECT_LE(t.size(), 23u);
    for (size_t i = 1; i < t.size(); ++i) EXPECT_LT(t[i - 1], t[i]);
    EXPECT_TRUE(std::isfinite(r.lo) && std::isfinite(r.hi));
    if (std::isfinite(lo) && std::isfinite(hi) && lo <= hi && hi < 1e300) {
      EXPECT_LE(r.lo, lo);
      EXPECT_GE(r.hi, hi);
    }
  }
  Range usual{0.2, 9.7};
  EXPECT_EQ(NiceTicks(&usual, 5), (std::vector<double>{0, 2, 4, 6, 8, 10}));
}

TEST(ReportTest, AThreeLineFileOfNearlyEqualHugeValuesRenders) {
  const std::string text =
      "{\"kind\": \"header\", \"schema\": 1, \"job\": \"x\"}\n"
      "{\"kind\": \"train\", \"t\": 1, \"step\": 1, \"loss\": 1e17}\n"
      "{\"kind\": \"train\", \"t\": 2, \"step\": 2, \"loss\": 100000000000000016}\n";
  auto run = ParseMetrics(text, "ulp.jsonl");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  const std::string html = RenderReport(*run, nullptr);
  EXPECT_LT(html.size(), 1u << 20);
  EXPECT_EQ(Points(ChartSvg(html, "loss"), "series"), std::vector<int>{2});
}

TEST(ReportTest, DeeplyNestedLinesAreSkippedNotACrash) {
  const std::string deep = std::string(50000, '[') + std::string(50000, ']');
  const std::string text =
      "{\"kind\": \"header\", \"schema\": 1, \"settings\": {\"a\": " + deep + "}}\n"
      "{\"kind\": \"train\", \"t\": 1, \"step\": 1, \"loss\": 3, \"x\": " + deep + "}\n"
      "{\"kind\": \"train\", \"t\": 2, \"step\": 2, \"loss\": 2}\n";
  auto run = ParseMetrics(text, "deep.jsonl");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->warnings.size(), 2u);
  EXPECT_NE(run->warnings[0].find("deep.jsonl:1:"), std::string::npos) << run->warnings[0];
  EXPECT_EQ(run->train.size(), 1u);
}

// A step or total beyond int64 (1e300) was converted to int64_t, undefined behaviour that
// UBSan stops on (found by fuzz/metrics_report_fuzz.cc): such a record is skipped with a
// warning, an unrepresentable total shows as unknown, and a huge schema is just newer.
TEST(ReportTest, NumbersBeyondInt64AreSkippedNotConverted) {
  const std::string text =
      "{\"kind\": \"header\", \"schema\": 1e300, \"job\": \"x\"}\n"
      "{\"kind\": \"train\", \"t\": 1, \"step\": 1e300, \"loss\": 3}\n"
      "{\"kind\": \"train\", \"t\": 2, \"step\": -1e19, \"loss\": 3}\n"
      "{\"kind\": \"train\", \"t\": 3, \"step\": 2, \"total_steps\": 1e300, \"loss\": 2}\n";
  auto run = ParseMetrics(text, "huge.jsonl");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->train.size(), 1u);
  EXPECT_EQ(run->train[0].step, 2);
  EXPECT_EQ(run->train[0].total_steps, 0);
  EXPECT_GT(run->schema, 1);
  ASSERT_EQ(run->warnings.size(), 3u);
  EXPECT_NE(run->warnings[1].find("huge.jsonl:2: a train record without a numeric 'step' in "
                                  "int64's range"),
            std::string::npos)
      << run->warnings[1];
  EXPECT_NE(run->warnings[2].find("huge.jsonl:3:"), std::string::npos) << run->warnings[2];
  EXPECT_LT(RenderReport(*run, nullptr).size(), 1u << 20);
}

TEST(ReportTest, NoMetricsIsAClearError) {
  auto empty = ParseMetrics("", "empty.jsonl");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("empty.jsonl: no metrics"), std::string::npos);
  auto header_only = ParseMetrics("{\"kind\": \"header\", \"schema\": 1}\n", "h.jsonl");
  EXPECT_FALSE(header_only.ok());
  const ::tandem::testing::ScratchDir scratch;  // not a fixed name: runs at once share TMPDIR
  const std::filesystem::path dir = scratch.path();
  auto missing = ReadRun(dir.string());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("metrics.jsonl"), std::string::npos);
  EXPECT_FALSE(ReadRun((dir / "nope").string()).ok());
  // A device file is neither a metrics file nor a run directory (it was read as a directory).
  auto device = ReadRun("/dev/null");
  ASSERT_FALSE(device.ok());
  EXPECT_NE(device.status().message().find("/dev/null: not a metrics file or a run directory"),
            std::string::npos) << device.status().ToString();
}

TEST(ReportTest, ACheckpointStepFolderFindsItsRunsMetrics) {
  const ::tandem::testing::ScratchDir scratch;
  const std::filesystem::path dir = scratch.path();
  std::filesystem::create_directories(dir / "step_00000100");
  std::filesystem::copy_file(kFixture, dir / "metrics.jsonl");
  auto run = ReadRun((dir / "step_00000100").string());
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->train.size(), 12u);
  std::vector<std::string> warnings;
  auto out = WriteReport(dir.string(), "", "", &warnings);
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(*out, (dir / "report.html").string());
  EXPECT_NE(ReadText(*out).find("data-chart=\"loss\""), std::string::npos);
}

TEST(ReportTest, AResumedRunContinuesItsClockAndARedoneStepKeepsTheLaterRecord) {
  const std::string text =
      "{\"kind\": \"header\", \"schema\": 1, \"t\": 0, \"job\": \"r\"}\n"
      "{\"kind\": \"train\", \"t\": 5, \"step\": 10, \"loss\": 3}\n"
      "{\"kind\": \"train\", \"t\": 9, \"step\": 20, \"loss\": 2}\n"
      "{\"kind\": \"header\", \"schema\": 1, \"t\": 0, \"job\": \"r\"}\n"
      "{\"kind\": \"train\", \"t\": 4, \"step\": 20, \"loss\": 1.5}\n"
      "{\"kind\": \"train\", \"t\": 8, \"step\": 30, \"loss\": 1}\n";
  auto run = ParseMetrics(text, "r.jsonl");
  ASSERT_TRUE(run.ok());
  ASSERT_EQ(run->train.size(), 3u);
  EXPECT_EQ(run->train[1].loss, 1.5);
  EXPECT_EQ(run->train[2].t, 17);  // 9 s before the resume + 8 s after
}

}  // namespace
}  // namespace tandem::report
