// The metrics endpoint's HTTP rules: see metrics_http.h.
#include "runtime/control/metrics_http.h"

#include <fmt/format.h>

namespace tandem {

HttpAnswer RouteMetricsRequest(std::string_view head) {
  HttpAnswer a;
  const size_t eol = head.find("\r\n");
  std::string_view line = head.substr(0, eol);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == 0 || sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos ||
      line.substr(sp2 + 1).rfind("HTTP/1.", 0) != 0) {
    a.code = 400;
    return a;
  }
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  if (method != "GET" && method != "HEAD") {
    a.code = 405;
    return a;
  }
  std::string_view path = target.substr(0, target.find('?'));
  if (path != "/metrics") {
    a.code = 404;
    return a;
  }
  a.serve_metrics = true;
  a.head_only = method == "HEAD";
  return a;
}

std::string FormatHttpResponse(const HttpAnswer& answer, const std::string& body) {
  const char* reason = "OK";
  std::string text;
  std::string extra;
  switch (answer.code) {
    case 200: text = body; break;
    case 400: reason = "Bad Request"; text = "bad request: expected GET /metrics HTTP/1.x\n"; break;
    case 404: reason = "Not Found"; text = "not found: try GET /metrics\n"; break;
    case 405:
      reason = "Method Not Allowed";
      text = "method not allowed: use GET or HEAD\n";
      extra = "Allow: GET, HEAD\r\n";
      break;
    case 431:
      reason = "Request Header Fields Too Large";
      text = fmt::format("request headers over {} bytes\n", kMaxHttpHeadBytes);
      break;
    case 503: reason = "Service Unavailable"; text = "too many connections\n"; break;
    default: reason = "Error"; break;
  }
  std::string out = fmt::format(
      "HTTP/1.0 {} {}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n{}"
      "Connection: close\r\n\r\n",
      answer.code, reason, text.size(), extra);
  if (!answer.head_only) out += text;
  return out;
}

}  // namespace tandem
