#include "tools/report/svg_chart.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "tools/report/svg_axes.h"

namespace tandem::report {
namespace {

constexpr double kWidth = 760, kHeight = 320;
constexpr double kLeft = 78, kRight = 24, kTop = 40, kBottom = 52;
constexpr const char* kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                   "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};

const char* Color(size_t i) { return kColors[i % (sizeof(kColors) / sizeof(kColors[0]))]; }

struct Frame {
  Scale x, y;
};

// The SVG's opening, title, axes with ticks and grid, axis labels; the scales to plot with.
std::string Axes(const Chart& c, Range xr, Range yr, Frame* f) {
  std::vector<double> xt = NiceTicks(&xr, 6), yt = NiceTicks(&yr, 5);
  f->x = {xr, kLeft, kWidth - kRight};
  f->y = {yr, kHeight - kBottom, kTop};
  std::string s = fmt::format(
      R"(<svg class="chart" data-chart="{}" xmlns="http://www.w3.org/2000/svg" )"
      R"(width="{}" height="{}" viewBox="0 0 {} {}" role="img" aria-label="{}">)"
      "\n<text class=\"title\" x=\"{}\" y=\"22\">{}</text>\n",
      Escape(c.id), kWidth, kHeight, kWidth, kHeight, Escape(c.title), kLeft, Escape(c.title));
  for (double v : yt) {
    const double py = f->y(v);
    s += fmt::format(R"(<line class="grid" x1="{}" y1="{:.1f}" x2="{}" y2="{:.1f}"/>)"
                     R"(<text class="tick" x="{}" y="{:.1f}" text-anchor="end">{}</text>)" "\n",
                     kLeft, py, kWidth - kRight, py, kLeft - 6, py + 4, TickLabel(v));
  }
  for (double v : xt) {
    const double px = f->x(v);
    s += fmt::format(R"(<line class="tickmark" x1="{:.1f}" y1="{}" x2="{:.1f}" y2="{}"/>)"
                     R"(<text class="tick" x="{:.1f}" y="{}" text-anchor="middle">{}</text>)" "\n",
                     px, kHeight - kBottom, px, kHeight - kBottom + 5, px,
                     kHeight - kBottom + 18, TickLabel(v));
  }
  s += fmt::format(R"(<rect class="frame" x="{}" y="{}" width="{}" height="{}"/>)" "\n", kLeft,
                   kTop, kWidth - kLeft - kRight, kHeight - kTop - kBottom);
  s += fmt::format(R"(<text class="axis-label" x="{}" y="{}" text-anchor="middle">{}</text>)" "\n",
                   (kLeft + kWidth - kRight) / 2, kHeight - 12, Escape(c.x_label));
  s += fmt::format(R"svg(<text class="axis-label" transform="translate(18,{}) rotate(-90)" )svg"
                   R"(text-anchor="middle">{}</text>)" "\n",
                   (kTop + kHeight - kBottom) / 2, Escape(c.y_label));
  return s;
}

Range Extent(const std::vector<Series>& series, bool x_axis, bool from_zero) {
  Range r{INFINITY, -INFINITY};
  for (const Series& s : series)
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      const double v = x_axis ? s.x[i] : s.y[i];
      r.lo = std::min(r.lo, v);
      r.hi = std::max(r.hi, v);
    }
  if (!std::isfinite(r.lo)) r = {0, 1};
  if (from_zero) r.lo = std::min(r.lo, 0.0);
  return r;
}

}  // namespace

std::string LegendHtml(const Chart& c) {
  std::string s = "<div class=\"legend\">";
  for (size_t i = 0; i < c.series.size(); ++i)
    s += fmt::format(R"(<span><i style="background:{}{}"></i>{}</span>)", Color(i),
                     c.series[i].dashed ? ";opacity:0.6" : "", Escape(c.series[i].name));
  return s + "</div>\n";
}

std::string Escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += ch;
    }
  }
  return out;
}

std::string LineChartSvg(const Chart& c) {
  Frame f;
  std::string s = Axes(c, Extent(c.series, true, false), Extent(c.series, false, c.y_from_zero), &f);
  for (size_t i = 0; i < c.series.size(); ++i) {
    const Series& se = c.series[i];
    std::string pts;
    int n = 0;
    for (size_t k = 0; k < se.x.size() && k < se.y.size(); ++k) {
      if (!std::isfinite(se.x[k]) || !std::isfinite(se.y[k])) continue;
      pts += fmt::format("{}{:.1f},{:.1f}", n ? " " : "", f.x(se.x[k]), f.y(se.y[k]));
      ++n;
    }
    s += fmt::format(R"(<polyline class="series" data-series="{}" data-points="{}" fill="none" )"
                     R"(stroke="{}" stroke-width="1.8"{} points="{}"/>)" "\n",
                     Escape(se.name), n, Color(i), se.dashed ? R"( stroke-dasharray="6 4")" : "",
                     pts);
  }
  return s + "</svg>\n";
}

std::string StackedChartSvg(const Chart& c) {
  const size_t n = c.series.empty() ? 0 : c.series[0].x.size();
  std::vector<double> base(n, 0.0);
  std::vector<std::vector<double>> tops;
  for (const Series& se : c.series) {
    std::vector<double> top = base;
    for (size_t k = 0; k < n && k < se.y.size(); ++k)
      if (std::isfinite(se.y[k])) top[k] += se.y[k];
    tops.push_back(top);
    base = top;
  }
  Series extent;
  if (n > 0) extent.x = c.series[0].x;
  extent.y = base;
  Frame f;
  std::string s = Axes(c, Extent({extent}, true, false), Extent({extent}, false, true), &f);
  std::vector<double> below(n, 0.0);
  for (size_t i = 0; i < c.series.size(); ++i) {
    std::string pts;
    for (size_t k = 0; k < n; ++k)
      pts += fmt::format("{:.1f},{:.1f} ", f.x(c.series[0].x[k]), f.y(tops[i][k]));
    for (size_t k = n; k-- > 0;)
      pts += fmt::format("{:.1f},{:.1f} ", f.x(c.series[0].x[k]), f.y(below[k]));
    if (!pts.empty()) pts.pop_back();
    s += fmt::format(R"(<polygon class="layer" data-series="{}" data-points="{}" fill="{}" )"
                     R"(fill-opacity="0.75" stroke="{}" points="{}"/>)" "\n",
                     Escape(c.series[i].name), n, Color(i), Color(i), pts);
    below = tops[i];
  }
  return s + "</svg>\n";
}

}  // namespace tandem::report
