// Inline SVG charts for `tandem report`: line charts (several series, e.g. two runs
// overlaid) and stacked area charts (the per-stage profile over time). No script, no
// external resource: the SVG text goes straight into the HTML page.
//
// Structure the report test relies on: each chart is <svg class="chart" data-chart=ID>,
// each series a <polyline class="series"> (line) or <polygon class="layer"> (stacked) with
// data-series=NAME and data-points=N, the number of finite points drawn.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

namespace tandem::report {

struct Series {
  std::string name;
  std::vector<double> x;
  std::vector<double> y;   // same length as x; non-finite points are skipped
  bool dashed = false;     // the --compare run
};

struct Chart {
  std::string id;          // data-chart attribute, e.g. "loss"
  std::string title;
  std::string x_label;     // with its unit, e.g. "step" or "time (s)"
  std::string y_label;     // with its unit, e.g. "loss (nats)"
  std::vector<Series> series;
  bool y_from_zero = false;  // start the y axis at 0 (throughput, bytes, shares)
};

// A line chart: one polyline per series, axes with ticks and grid lines.
std::string LineChartSvg(const Chart& chart);
// A stacked area chart: series[i].y stacked in order over the shared x of series[0]
// (every series must have the same x; extra points are ignored).
std::string StackedChartSvg(const Chart& chart);
// The chart's legend as an HTML row (colour swatch and name per series), placed under it.
std::string LegendHtml(const Chart& chart);
// Escapes &, <, >, " for HTML/SVG text and attributes.
std::string Escape(const std::string& s);

}  // namespace tandem::report
