// The metrics endpoint serves GET/HEAD /metrics only: routing as a pure function, then the
// same answers over a real TCP connection. The text format's selector families carry a
// sample only for a job whose drafter has a selector.
#include "runtime/control/metrics_http.h"

#include <gtest/gtest.h>

#include "runtime/control/metrics.h"

#include "runtime/control/server.h"
#include "runtime/control/server_test_util.h"

namespace tandem {
namespace {

using testing::RawClient;

TEST(MetricsTextTest, SelectorGaugesOnlyForADrafterWithASelector) {
  JobStatus dflash, dflash2;
  dflash.id = "j1";
  dflash.name = "dflash";
  dflash.training.active = true;
  dflash2 = dflash;
  dflash2.id = "j2";
  dflash2.name = "dflash2";
  dflash2.training.selector = {true, 0.5, 0.875, 0.625};
  const std::string text = FormatPrometheus({dflash, dflash2});
  EXPECT_NE(text.find("# TYPE tandem_train_candidate_recall gauge"), std::string::npos);
  size_t samples = 0;
  for (size_t at = 0; (at = text.find("\ntandem_train_candidate_recall{", at)) !=
                      std::string::npos; ++at) {
    ++samples;
    const std::string line = text.substr(at + 1, text.find('\n', at + 1) - at - 1);
    EXPECT_NE(line.find("dflash2"), std::string::npos) << line;
    EXPECT_NE(line.find("} 0.875"), std::string::npos) << line;
  }
  EXPECT_EQ(samples, 1u) << text;
  EXPECT_NE(text.find("tandem_train_selector_accuracy{"), std::string::npos);
  EXPECT_NE(text.find("tandem_train_selector_loss{"), std::string::npos);
}

TEST(MetricsHttpTest, RoutesOnlyGetAndHeadOfMetrics) {
  EXPECT_EQ(RouteMetricsRequest("GET /metrics HTTP/1.1\r\nHost: x").code, 200);
  EXPECT_TRUE(RouteMetricsRequest("GET /metrics HTTP/1.0").serve_metrics);
  EXPECT_EQ(RouteMetricsRequest("GET /metrics?name[]=x HTTP/1.1").code, 200);
  HttpAnswer head = RouteMetricsRequest("HEAD /metrics HTTP/1.1");
  EXPECT_EQ(head.code, 200);
  EXPECT_TRUE(head.head_only);
  EXPECT_EQ(RouteMetricsRequest("GET /metricsXYZ HTTP/1.1").code, 404);
  EXPECT_EQ(RouteMetricsRequest("GET /metrics/../../etc/passwd HTTP/1.1").code, 404);
  EXPECT_EQ(RouteMetricsRequest("GET / HTTP/1.1").code, 404);
  EXPECT_EQ(RouteMetricsRequest("POST /metrics HTTP/1.1").code, 405);
  EXPECT_EQ(RouteMetricsRequest("DELETE /x HTTP/1.1").code, 405);
  EXPECT_EQ(RouteMetricsRequest("GET /metrics").code, 400);
  EXPECT_EQ(RouteMetricsRequest("GET /metrics SPDY/3").code, 400);
  EXPECT_EQ(RouteMetricsRequest("").code, 400);
  EXPECT_EQ(RouteMetricsRequest(" /metrics HTTP/1.1").code, 400);
}

TEST(MetricsHttpTest, ResponsesCarryTheRightStatusLine) {
  HttpAnswer a;
  a.code = 405;
  std::string r = FormatHttpResponse(a, "ignored");
  EXPECT_EQ(r.rfind("HTTP/1.0 405 Method Not Allowed\r\n", 0), 0u) << r;
  EXPECT_NE(r.find("Allow: GET, HEAD\r\n"), std::string::npos);
  a = HttpAnswer{};
  a.serve_metrics = a.head_only = true;
  r = FormatHttpResponse(a, "abcdef");
  EXPECT_NE(r.find("Content-Length: 6\r\n"), std::string::npos);
  EXPECT_EQ(r.find("abcdef"), std::string::npos) << "HEAD sends no body";
}

class MetricsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ServerOptions o;
    o.metrics_port = 0;
    auto s = ControlServer::Start(o, ControlServer::Inline([](const ControlRequest&) {
                                    return ControlResponse{};
                                  }),
                                  [] { return std::string("tandem_up 1\n"); });
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    server_ = std::move(*s);
  }

  // The whole response to `request`.
  std::string Exchange(const std::string& request) {
    RawClient c = RawClient::Tcp(server_->metrics_port());
    EXPECT_TRUE(c.Send(request));
    std::string all;
    while (auto chunk = c.Read(1)) all += *chunk;
    return all;
  }

  std::unique_ptr<ControlServer> server_;
};

TEST_F(MetricsServerTest, ServesMetricsOnlyAndRefusesTheRest) {
  std::string ok = Exchange("GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n");
  EXPECT_EQ(ok.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << ok;
  EXPECT_NE(ok.find("\r\n\r\ntandem_up 1\n"), std::string::npos) << ok;
  std::string head = Exchange("HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_EQ(head.rfind("HTTP/1.0 200 OK\r\n", 0), 0u) << head;
  EXPECT_EQ(head.find("tandem_up"), std::string::npos) << head;
  for (const char* path : {"/metricsXYZ", "/metrics/../../etc/passwd", "/"}) {
    std::string r = Exchange(fmt::format("GET {} HTTP/1.1\r\n\r\n", path));
    EXPECT_EQ(r.rfind("HTTP/1.0 404 Not Found\r\n", 0), 0u) << path << ": " << r;
    EXPECT_EQ(r.find("tandem_up"), std::string::npos);
  }
  std::string post = Exchange("POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n");
  EXPECT_EQ(post.rfind("HTTP/1.0 405 Method Not Allowed\r\n", 0), 0u) << post;
  std::string big = Exchange("GET /metrics HTTP/1.1\r\nX-Pad: " + std::string(10000, 'p') +
                             "\r\n\r\n");
  EXPECT_EQ(big.rfind("HTTP/1.0 431 Request Header Fields Too Large\r\n", 0), 0u) << big;
}

}  // namespace
}  // namespace tandem
