// BottleneckVerdict: which side waits, and checkpointing named when it is what blocks the
// training loop (a synchronous 15 GB checkpoint used to show up only as the target's push
// wait).
#include "runtime/job/job_status.h"

#include <gtest/gtest.h>

namespace tandem {
namespace {

// A 100 s job with the target pushing into 'hidden' and the drafter popping from it.
JobStatus Job(double push_wait_s, double pop_wait_s) {
  JobStatus j;
  j.seconds = 100;
  ChannelStatus c;
  c.name = "hidden";
  c.push_wait_s = push_wait_s;
  c.pop_wait_s = pop_wait_s;
  c.writers = 1;
  c.readers = 1;
  j.channels.push_back(c);
  return j;
}

void AddStage(JobStatus& j, const std::string& name, double total_s) {
  StageStatus st;
  st.name = name;
  st.count = 2;
  st.total_s = total_s;
  st.percent_of_wall = 100 * total_s / j.seconds;
  j.stages.push_back(st);
}

TEST(CheckpointVerdictTest, NamesCheckpointingWhenItBlocksTheLoop) {
  // A measured run: the target blocked 45% of the time on a full channel, because the
  // drafter sat in synchronous checkpoint writes.
  JobStatus j = Job(/*push_wait_s=*/45, /*pop_wait_s=*/2);
  AddStage(j, "target.push_wait", 45);
  AddStage(j, "drafter.checkpoint.write", 41);
  AddStage(j, "drafter.checkpoint.wait", 41);
  AddStage(j, "drafter.checkpoint.snapshot", 3);
  const std::string v = BottleneckVerdict(j);
  EXPECT_TRUE(v.starts_with("checkpointing blocks training: 44% of wall in "
                            "drafter.checkpoint.wait 41% + drafter.checkpoint.snapshot 3%"))
      << v;
  // The channel wait it causes is still reported.
  EXPECT_NE(v.find("producers wait on consumers: 45%"), std::string::npos) << v;
}

TEST(CheckpointVerdictTest, BackgroundWritesAloneDoNotBlock) {
  // Asynchronous checkpoints: the write runs in the background for most of the wall, the
  // loop itself waited little. The verdict is about the channel, not checkpointing.
  JobStatus j = Job(/*push_wait_s=*/45, /*pop_wait_s=*/2);
  AddStage(j, "drafter.checkpoint.write", 80);
  AddStage(j, "drafter.checkpoint.wait", 1);
  AddStage(j, "drafter.checkpoint.snapshot", 2);
  const std::string v = BottleneckVerdict(j);
  EXPECT_TRUE(v.starts_with("producers wait on consumers: 45%")) << v;
}

TEST(CheckpointVerdictTest, StarvedLoopIsTheProducersFault) {
  // The drafter waits for batches 80% of the time; its 25% in checkpoints is not what slows
  // the job.
  JobStatus j = Job(/*push_wait_s=*/0, /*pop_wait_s=*/80);
  AddStage(j, "drafter.checkpoint.wait", 25);
  EXPECT_TRUE(BottleneckVerdict(j).starts_with("consumers wait on producers: 80%"))
      << BottleneckVerdict(j);
  // ...unless checkpointing holds the loop longer than the starvation does.
  JobStatus k = Job(/*push_wait_s=*/0, /*pop_wait_s=*/30);
  AddStage(k, "drafter.checkpoint.wait", 60);
  EXPECT_TRUE(BottleneckVerdict(k).starts_with("checkpointing blocks training: 60%"))
      << BottleneckVerdict(k);
}

TEST(CheckpointVerdictTest, NamesCheckpointingWithoutChannelWaits) {
  JobStatus j = Job(/*push_wait_s=*/5, /*pop_wait_s=*/5);
  AddStage(j, "drafter.checkpoint.wait", 30);
  const std::string v = BottleneckVerdict(j);
  EXPECT_TRUE(v.starts_with("checkpointing blocks training: 30%")) << v;
  EXPECT_EQ(v.find("producers wait"), std::string::npos) << v;
  // Below the threshold it is a balanced job.
  JobStatus k = Job(5, 5);
  AddStage(k, "drafter.checkpoint.wait", 10);
  EXPECT_TRUE(BottleneckVerdict(k).starts_with("balanced")) << BottleneckVerdict(k);
}

// The drafter's eval decodes between batches: when that holds the loop for a large share of
// the wall, the verdict says so (not only "producers wait on consumers").
TEST(EvalVerdictTest, NamesEvaluationWhenItBlocksTheLoop) {
  JobStatus j = Job(/*push_wait_s=*/35, /*pop_wait_s=*/2);
  AddStage(j, "target.push_wait", 35);
  AddStage(j, "drafter.eval", 33);
  AddStage(j, "drafter.forward_backward", 50);
  const std::string v = BottleneckVerdict(j);
  EXPECT_TRUE(v.starts_with("evaluation blocks training: 33% of wall in drafter.eval 33%")) << v;
  EXPECT_NE(v.find("producers wait on consumers: 35%"), std::string::npos) << v;
  // A small eval share is noise.
  JobStatus k = Job(2, 2);
  AddStage(k, "drafter.eval", 5);
  EXPECT_TRUE(BottleneckVerdict(k).starts_with("balanced")) << BottleneckVerdict(k);
}

}  // namespace
}  // namespace tandem
