// Fuzzes the metrics endpoint's request routing (runtime/control/metrics_http.h) on what a
// client sends, cut as the server cuts it: the head up to the first blank line, or 431 when
// none comes within kMaxHttpHeadBytes. Only GET or HEAD of /metrics (a query allowed) on an
// HTTP/1.x request line is served; every answer is a known status, and the response carries
// that status, a Content-Length equal to its body and, for HEAD, no body.
#include <string>
#include <string_view>

#include "fuzz/fuzz_util.h"
#include "runtime/control/metrics_http.h"

using namespace tandem;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const size_t end = in.find("\r\n\r\n");
  HttpAnswer a;
  if (end == std::string_view::npos || end + 4 > kMaxHttpHeadBytes) {
    a.code = 431;
  } else {
    const std::string_view head = in.substr(0, end);
    a = RouteMetricsRequest(head);
    const std::string_view line = head.substr(0, head.find("\r\n"));
    const bool get = line.rfind("GET /metrics", 0) == 0, head_req = line.rfind("HEAD /metrics", 0) == 0;
    TANDEM_FUZZ_ASSERT(a.code == 200 || a.code == 400 || a.code == 404 || a.code == 405);
    TANDEM_FUZZ_ASSERT(a.serve_metrics == (a.code == 200));
    if (a.code == 200) {
      TANDEM_FUZZ_ASSERT(get || head_req);
      TANDEM_FUZZ_ASSERT(a.head_only == head_req);
      const size_t sp = line.find(' ', line.find(' ') + 1);
      const std::string_view target = line.substr(line.find(' ') + 1, sp - line.find(' ') - 1);
      TANDEM_FUZZ_ASSERT(target == "/metrics" || target.rfind("/metrics?", 0) == 0);
      TANDEM_FUZZ_ASSERT(line.substr(sp + 1).rfind("HTTP/1.", 0) == 0);
    }
  }
  const std::string body = "tandem_up 1\n";
  const std::string r = FormatHttpResponse(a, body);
  TANDEM_FUZZ_ASSERT(r.rfind("HTTP/1.0 " + std::to_string(a.code) + " ", 0) == 0);
  const size_t blank = r.find("\r\n\r\n");
  TANDEM_FUZZ_ASSERT(blank != std::string::npos);
  const std::string_view sent = std::string_view(r).substr(blank + 4);
  const size_t cl = r.find("Content-Length: ");
  TANDEM_FUZZ_ASSERT(cl != std::string::npos && cl < blank);
  const size_t length = std::stoul(r.substr(cl + 16, r.find("\r\n", cl) - cl - 16));
  TANDEM_FUZZ_ASSERT(a.head_only ? sent.empty() : sent.size() == length);
  if (a.code == 200 && !a.head_only) TANDEM_FUZZ_ASSERT(sent == body);
  return 0;
}
