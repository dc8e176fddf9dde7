// The metrics endpoint's HTTP rules, as a pure function the server and tests share: only
// GET or HEAD of exactly /metrics (a query string is allowed) is served.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tandem {

// Request line and headers together may not exceed this (431 otherwise).
inline constexpr size_t kMaxHttpHeadBytes = 8192;

struct HttpAnswer {
  int code = 200;            // 200, 400, 404, 405 or 431
  bool serve_metrics = false;  // 200: the exposition text
  bool head_only = false;      // HEAD: headers without the body
};

// Routes a request head: everything up to (not including) the blank line that ends it.
HttpAnswer RouteMetricsRequest(std::string_view head);

// A whole HTTP/1.0 response (Connection: close) for `answer`; `body` is the exposition text
// for a 200 and ignored otherwise.
std::string FormatHttpResponse(const HttpAnswer& answer, const std::string& body);

}  // namespace tandem
