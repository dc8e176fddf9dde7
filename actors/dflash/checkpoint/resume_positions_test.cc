// ResumePositions and the dflash.drafter class's job-prepare hook: a resumed drafter group
// publishes its checkpoint's per-replica data positions under its target group (several
// target groups feeding one channel each get their own, by writer index), a fresh one
// publishes nothing, and two resumed groups that train against one target group are refused.
#include "actors/dflash/checkpoint/resume_positions.h"

#include <filesystem>
#include <map>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "actors/dflash/checkpoint/checkpoint_state.h"
#include "tests/support/scratch_dir.h"

namespace tandem::dflash {
namespace {

namespace fs = std::filesystem;

// A checkpoint directory whose `latest` step saved positions for channel writers 0 and 1
// (and `extra` more).
void WriteCheckpoint(const std::string& dir, const std::map<int, data::DataPosition>& extra = {}) {
  ResumeState st;
  st.step = 20;
  st.tokens = 640;
  st.path = dir + "/" + StepDirName(20);
  st.positions = extra;
  st.positions[0] = {0, 11};
  st.positions[1] = {1, 3};
  fs::create_directories(st.path);
  ASSERT_TRUE(CommitState(dir, st).ok());
}

JobSpec Job(const std::string& drafters) {
  auto job = ParseJobText(fmt::format(R"(
[channels.hidden]
[actors.target]
class = "dflash.target"
replicas = 2
out = "hidden"
{})", drafters), "job.toml");
  EXPECT_TRUE(job.ok()) << job.status().ToString();
  return job.ok() ? *job : JobSpec{};
}

std::string Drafter(const std::string& name, const std::string& dir, const std::string& resume) {
  return fmt::format(R"(
[actors.{}]
class = "dflash.drafter"
in = "hidden"
resume = {}
checkpoint = {{ dir = "{}" }}
)", name, resume, dir);
}

TEST(ResumePositionsTest, ResumedDrafterPublishesEachTargetReplicasPosition) {
  const ::tandem::testing::ScratchDir scratch;
  const std::string dir = scratch.path() + "/ckpt";
  WriteCheckpoint(dir);
  JobSpec job = Job(Drafter("drafter", dir, "true"));
  JobRegistry registry;
  ASSERT_TRUE(PublishResumePositions(job, job.actors[1], registry).ok());
  const ResumePositions& p = registry.Get<ResumePositions>();
  EXPECT_EQ(p.For("target", 0), (data::DataPosition{0, 11}));
  EXPECT_EQ(p.For("target", 1), (data::DataPosition{1, 3}));
  EXPECT_FALSE(p.For("target", 2).has_value());
  EXPECT_FALSE(p.For("other", 0).has_value());
}

// A second target group on the same channel is writer 2 (after target's two replicas): its
// replica 0 resumes from writer 2's position, not from target/0's.
TEST(ResumePositionsTest, EachTargetGroupOnTheChannelGetsItsOwnWritersPositions) {
  const ::tandem::testing::ScratchDir scratch;
  const std::string dir = scratch.path() + "/ckpt";
  WriteCheckpoint(dir, {{2, {0, 5}}});
  JobSpec job = Job(Drafter("drafter", dir, "true") + R"(
[actors.target2]
class = "dflash.target"
out = "hidden"
)");
  JobRegistry registry;
  ASSERT_TRUE(PublishResumePositions(job, job.actors[1], registry).ok());
  const ResumePositions& p = registry.Get<ResumePositions>();
  EXPECT_EQ(p.For("target", 0), (data::DataPosition{0, 11}));
  EXPECT_EQ(p.For("target", 1), (data::DataPosition{1, 3}));
  EXPECT_EQ(p.For("target2", 0), (data::DataPosition{0, 5}));
}

TEST(ResumePositionsTest, FreshDrafterPublishesNothing) {
  const ::tandem::testing::ScratchDir scratch;
  const std::string dir = scratch.path() + "/ckpt";
  WriteCheckpoint(dir);
  JobSpec job = Job(Drafter("drafter", dir, "false"));
  JobRegistry registry;
  ASSERT_TRUE(PublishResumePositions(job, job.actors[1], registry).ok());
  EXPECT_FALSE(registry.Get<ResumePositions>().For("target", 0).has_value());
}

TEST(ResumePositionsTest, TwoResumedGroupsOnOneTargetGroupAreRefused) {
  const ::tandem::testing::ScratchDir scratch;
  const std::string a = scratch.path() + "/a", b = scratch.path() + "/b";
  WriteCheckpoint(a);
  WriteCheckpoint(b);
  JobSpec job = Job(Drafter("d1", a, "true") + Drafter("d2", b, "true"));
  JobRegistry registry;
  ASSERT_TRUE(PublishResumePositions(job, job.actors[1], registry).ok());
  Status second = PublishResumePositions(job, job.actors[2], registry);
  EXPECT_EQ(second.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(second.message().find("target group 'target'"), std::string::npos)
      << second.ToString();
}

}  // namespace
}  // namespace tandem::dflash
