// Fuzzes the metrics file `tandem report` reads (tools/report/metrics_reader.h, schema in
// docs/metrics.md) and the page it renders from it: a line that cannot be used is a warning
// naming the file and line, never an exception or undefined behaviour (huge, negative or
// non-finite numbers included); an accepted run has training or sample records, its training
// rows in strictly increasing step order; and the page, alone or with the run overlaid on
// itself, is a whole HTML document.
#include <string>

#include "fuzz/fuzz_util.h"
#include "tools/report/html_report.h"
#include "tools/report/metrics_reader.h"

using namespace tandem::report;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto run = ParseMetrics(text, "metrics.jsonl");
  if (!run.ok()) {
    TANDEM_FUZZ_ASSERT(run.status().message().find("metrics.jsonl") != std::string::npos);
    return 0;
  }
  TANDEM_FUZZ_ASSERT(!run->train.empty() || !run->samples.empty());
  for (size_t k = 1; k < run->train.size(); ++k) {
    TANDEM_FUZZ_ASSERT(run->train[k - 1].step < run->train[k].step);
  }
  for (const std::string& w : run->warnings) {
    TANDEM_FUZZ_ASSERT(w.rfind("metrics.jsonl:", 0) == 0);
  }
  const RunData* self = &*run;
  for (const RunData* compare : {static_cast<const RunData*>(nullptr), self}) {
    const std::string page = RenderReport(*run, compare);
    TANDEM_FUZZ_ASSERT(page.rfind("<!DOCTYPE html>", 0) == 0);
    TANDEM_FUZZ_ASSERT(page.size() >= 15 && page.compare(page.size() - 15, 15, "</body></html>\n") == 0);
  }
  return 0;
}
