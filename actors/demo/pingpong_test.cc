// The pingpong job end to end on the embedded runtime: every produced object is consumed and
// verified, the store is empty afterwards, a consumer that throws is restarted and the job
// still completes, and bad jobs fail with the promised messages.
#include "actors/demo/pingpong.h"

#include <regex>

#include <gtest/gtest.h>

#include "actors/demo/consumer_faults.h"
#include "runtime/job/job_registry.h"
#include "runtime/job/job_spec.h"
#include "runtime/job/runner.h"

namespace tandem {
namespace {

std::string Job(int producers, int objects, int consumers, const std::string& extra_consumer = "",
                int store_mb = 2) {
  return fmt::format(R"(
[job]
name = "pp"
seed = 3
[store]
capacity_mb = {}
[channels.objects]
capacity = 16
min_ready = 2
[actors.producer]
class = "demo.producer"
replicas = {}
out = "objects"
objects = {}
object_bytes = 4000
[actors.consumer]
class = "demo.consumer"
replicas = {}
in = "objects"
{}
)",
                     store_mb, producers, objects, consumers, extra_consumer);
}

uint64_t ConsumedCount(const JobReport& r) {
  uint64_t total = 0;
  std::regex re("consumed (\\d+) objects");
  for (const auto& a : r.actors) {
    std::smatch m;
    if (std::regex_search(a.summary, m, re)) total += std::stoull(m[1]);
  }
  return total;
}

TEST(PingpongTest, EveryObjectVerifiedAndStoreEmpty) {
  auto job = ParseJobText(Job(2, 600, 3), "pp.toml");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  JobRunner runner;
  auto report = runner.Run(*job);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->status.ok()) << report->ToString();
  EXPECT_EQ(ConsumedCount(*report), 1200u) << report->ToString();
  EXPECT_EQ(report->store.live_objects, 0u);
  EXPECT_EQ(report->store.bytes_used, 0u);
  EXPECT_EQ(report->store.creates, 1200u);
  // 1200 objects of 4000 B do not fit in 2 MiB at once: memory was reused.
  EXPECT_LT(report->store.high_water, 2u << 20);
  ASSERT_EQ(report->channels.size(), 1u);
  EXPECT_EQ(report->channels[0].total_pushed, 1200u);
  EXPECT_EQ(report->channels[0].total_popped, 1200u);
}

// A registry whose consumers throw once after `fail_at` objects (consumer_faults.h).
std::shared_ptr<JobRegistry> Faults(int64_t fail_at) {
  auto registry = std::make_shared<JobRegistry>();
  registry->Get<demo::ConsumerFaults>().Set({.fail_at = fail_at});
  return registry;
}

TEST(PingpongTest, FaultsAreNotJobKeys) {
  auto job = ParseJobText(Job(1, 10, 1, "fail_at = 5"), "pp.toml");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  JobRunner runner;
  auto report = runner.Run(*job);
  ASSERT_FALSE(report.ok() && report->status.ok()) << "fail_at was accepted as a job key";
  const std::string message = report.ok() ? report->status.message() : report.status().message();
  EXPECT_NE(message.find("fail_at"), std::string::npos) << message;
}

TEST(PingpongTest, ThrowingConsumerIsRestartedAndJobCompletes) {
  auto job = ParseJobText(Job(1, 400, 1, "max_restarts = 2"), "pp.toml");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  JobRunner runner({.registry = Faults(50)});
  auto report = runner.Run(*job);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_TRUE(report->status.ok()) << report->ToString();
  ASSERT_EQ(report->actors.size(), 2u);
  EXPECT_EQ(report->actors[1].restarts, 1) << report->ToString();
  // The batch that threw was dropped with the failed instance; the rest were verified.
  EXPECT_GT(ConsumedCount(*report), 300u);
  EXPECT_EQ(report->store.live_objects, 0u) << report->ToString();
}

TEST(PingpongTest, ConsumerWithoutRestartsFailsTheJobWithItsCause) {
  auto job = ParseJobText(Job(1, 400, 1), "pp.toml");
  ASSERT_TRUE(job.ok());
  JobRunner runner({.registry = Faults(10)});
  auto report = runner.Run(*job);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_FALSE(report->status.ok());
  EXPECT_NE(report->status.message().find("fail_at=10"), std::string::npos)
      << report->status.ToString();
  EXPECT_NE(report->status.message().find("consumer/0"), std::string::npos);
  EXPECT_EQ(report->store.live_objects, 0u) << report->ToString();
}

TEST(PingpongTest, UnknownClassIsRejectedBeforeAnythingRuns) {
  std::string text = Job(1, 10, 1);
  text.replace(text.find("demo.consumer"), 13, "demo.consumr");
  auto job = ParseJobText(text, "pp.toml");
  ASSERT_TRUE(job.ok());
  JobRunner runner;
  auto report = runner.Run(*job);
  ASSERT_FALSE(report.ok());
  EXPECT_NE(report.status().message().find("did you mean 'demo.consumer'"), std::string::npos)
      << report.status().ToString();
  EXPECT_NE(report.status().message().find("pp.toml:"), std::string::npos);
}

TEST(PingpongTest, ChecksumDetectsCorruption) {
  std::vector<uint8_t> a(1001);
  demo::FillObject(a.data(), a.size(), 1, 0, 7);
  uint64_t sum = demo::Checksum(a.data(), a.size());
  a[1000] ^= 1;
  EXPECT_NE(sum, demo::Checksum(a.data(), a.size()));
}

}  // namespace
}  // namespace tandem
