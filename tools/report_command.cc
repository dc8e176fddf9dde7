// `tandem report RUN [--compare RUN2] [-o OUT.html]`: the run's metrics as one HTML page.
#include <cstdio>

#include <nlohmann/json.hpp>

#include "tools/cli_util.h"
#include "tools/commands.h"
#include "tools/report/html_report.h"

namespace tandem::cli {

int Report(const Common& c, const std::string& run, const std::string& compare,
           const std::string& out) {
  std::vector<std::string> warnings;
  auto path = report::WriteReport(run, compare, out, &warnings);
  if (!path.ok()) return Fail(c, "report", path.status(), kExitUsage);
  // Warnings quote the metrics file (record kinds, job names): escaped for the terminal.
  for (const std::string& w : warnings)
    std::fprintf(stderr, "tandem report: warning: %s\n", EscapeControl(w).c_str());
  if (c.json) {
    nlohmann::json j = {{"report", *path}, {"warnings", warnings}};
    std::printf("%s\n", j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
  } else {
    std::printf("%s\n", path->c_str());
  }
  return kExitOk;
}

}  // namespace tandem::cli
