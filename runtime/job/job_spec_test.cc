#include "runtime/job/job_spec.h"

#include <gtest/gtest.h>

namespace tandem {
namespace {

constexpr const char* kGood = R"(
[job]
name = "demo"
seed = 7

[channels.hidden]
capacity = 8
min_ready = 2

[actors.producer]
class = "demo.producer"
out = "hidden"
objects = 100

[actors.consumer]
class = "demo.consumer"
replicas = 2
gpus = 0.5
in = "hidden"
max_restarts = 3

[profile]
interval_s = 5
)";

TEST(JobSpecTest, ParsesGraph) {
  auto job = ParseJobText(kGood, "job.toml");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->name, "demo");
  EXPECT_EQ(job->seed, 7);
  ASSERT_EQ(job->channels.size(), 1u);
  EXPECT_EQ(job->channels[0].capacity, 8);
  EXPECT_EQ(job->channels[0].min_ready, 2);
  ASSERT_EQ(job->actors.size(), 2u);
  EXPECT_EQ(job->actors[0].name, "producer");  // file order kept
  EXPECT_EQ(job->actors[1].replicas, 2);
  EXPECT_DOUBLE_EQ(job->actors[1].gpus, 0.5);
  EXPECT_EQ(job->actors[1].max_restarts, 3);
  EXPECT_EQ(*job->actors[0].settings.GetInt("objects", 0), 100);
  EXPECT_DOUBLE_EQ(job->profile_interval_s, 5);
}

void ExpectError(const std::string& text, const std::string& needle) {
  auto job = ParseJobText(text, "bad.toml");
  ASSERT_FALSE(job.ok()) << "accepted:\n" << text;
  EXPECT_EQ(job.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(job.status().message().find(needle), std::string::npos)
      << "message: " << job.status().message() << "\nexpected to contain: " << needle;
}

TEST(JobSpecTest, ErrorsNameFileLineAndKey) {
  ExpectError("[job\nname = 1", "bad.toml:1");
  // Issue 18 (job_spec_fuzz): a section given as a value aborted the process (the daemon).
  ExpectError("store=\"j\"", "[store] must be a table");
  ExpectError("job = 1\n", "[job] must be a table");
  ExpectError("profile = [1]\n", "[profile] must be a table");
  ExpectError("[channels]\nhidden = 3\n", "must be a table");
  ExpectError("[actors.a]\nclass = \"x\"\nreplicas = \"two\"\n", "bad.toml:3");
  ExpectError("[actors.a]\nclass = \"x\"\nreplicas = \"two\"\n", "replicas");
  ExpectError("[actors.a]\nclass = \"x\"\nreplicas = 0\n", "expected an integer >= 1");
  ExpectError("[actors.a]\nreplicas = 1\n", "class");
  ExpectError("[job]\nnmae = \"x\"\n[actors.a]\nclass = \"x\"\n", "did you mean 'name'");
  ExpectError("[chanels.h]\ncapacity = 1\n", "did you mean 'channels'");
  ExpectError("[channels.hidden]\ncapacity = 4\n[actors.a]\nclass = \"x\"\nin = \"hiden\"\n",
              "did you mean 'hidden'");
  ExpectError("[channels.h]\ncapacity = 4\nmin_ready = 5\n[actors.a]\nclass = \"x\"\n",
              "min_ready");
  ExpectError("[job]\nname = \"x\"\n", "no [actors.NAME]");
  ExpectError("[actors.a]\nclass = \"x\"\ngpus = 1.5\n", "gpus");
}

TEST(JobSpecTest, MissingFile) {
  auto job = LoadJobFile("/nonexistent/job.toml");
  ASSERT_FALSE(job.ok());
  EXPECT_EQ(job.status().code(), StatusCode::kNotFound);
  EXPECT_NE(job.status().message().find("/nonexistent/job.toml"), std::string::npos);
}

TEST(JobSpecTest, DidYouMean) {
  EXPECT_EQ(DidYouMean("replics", {"replicas", "class"}), "replicas");
  EXPECT_EQ(DidYouMean("zzzzzz", {"replicas", "class"}), "");
}

}  // namespace
}  // namespace tandem
