// Decoding control-plane messages: honest messages round-trip, and a hostile payload cannot
// make the decoder do work out of proportion to its size.
#include "runtime/control/messages.h"

#include <gtest/gtest.h>
#include <sys/resource.h>

#include <fstream>
#include <sstream>
#include <string>

namespace tandem {
namespace {

TEST(MessagesTest, ResponseWithManyActorsRoundTrips) {
  ControlResponse r;
  r.kind = ControlResponse::Kind::kJobs;
  JobStatus j;
  j.id = "j1";
  j.name = "tiny";
  j.actors.resize(2000);
  for (size_t i = 0; i < j.actors.size(); ++i) j.actors[i].name = "a" + std::to_string(i);
  r.jobs.push_back(j);
  const std::string frame = EncodeResponse(r);
  auto back = DecodeResponse(frame.substr(kFrameHeaderBytes));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->jobs.size(), 1u);
  ASSERT_EQ(back->jobs[0].actors.size(), 2000u);
  EXPECT_EQ(back->jobs[0].actors[1999].name, "a1999");
}

// `tandem status` against a daemon or a running `tandem run` carries the drafter's last
// evaluation (its tau by speculative decoding) across the wire.
TEST(MessagesTest, TrainingEvalRoundTrips) {
  ControlResponse r;
  r.kind = ControlResponse::Kind::kJobs;
  JobStatus j;
  j.training.active = true;
  j.training.tau = 1.5;
  j.training.eval = {true, 200, 3.25, 410.5, 8, {0.9, 0.5, 0.25}, 150, 3.5};
  r.jobs.push_back(j);
  auto back = DecodeResponse(EncodeResponse(r).substr(kFrameHeaderBytes));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->jobs.size(), 1u);
  const EvalStatus& e = back->jobs[0].training.eval;
  EXPECT_TRUE(e.active);
  EXPECT_EQ(e.step, 200);
  EXPECT_DOUBLE_EQ(e.tau, 3.25);
  EXPECT_DOUBLE_EQ(e.tok_s, 410.5);
  EXPECT_EQ(e.prompts, 8);
  EXPECT_EQ(e.accept_rate, (std::vector<double>{0.9, 0.5, 0.25}));
  EXPECT_EQ(e.best_step, 150);
  EXPECT_DOUBLE_EQ(e.best_tau, 3.5);
  EXPECT_DOUBLE_EQ(back->jobs[0].training.tau, 1.5);
}

long MaxRssKb() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

// Found by control_frame_fuzz: 192 bytes whose jobs[0].actors list claims ~2 million
// all-default elements. With a traversal limit sized for the largest frame the decoder built
// them all (seconds of CPU, ~800 MB) before failing; it must be refused before that work, so
// the process's peak memory barely moves.
TEST(MessagesTest, SmallPayloadClaimingHugeListIsRefused) {
  std::ifstream f(std::string(TANDEM_SOURCE_DIR) +
                      "/runtime/control/testdata/response_list_amplification.bin",
                  std::ios::binary);
  ASSERT_TRUE(f) << "testdata missing";
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string payload = ss.str();
  ASSERT_EQ(payload.size(), 192u);
  const long rss0 = MaxRssKb();
  auto r = DecodeResponse(payload);
  EXPECT_LT(MaxRssKb() - rss0, 100 * 1024) << "KiB of peak memory grown decoding 192 bytes";
  ASSERT_FALSE(r.ok()) << "decoded " << r->jobs.size() << " jobs";
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().ToString();
}

}  // namespace
}  // namespace tandem
