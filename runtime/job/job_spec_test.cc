#include "runtime/job/job_spec.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "tests/support/scratch_dir.h"

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
  // Found by job_spec_fuzz: a section given as a value aborted the process (the daemon).
  ExpectError("store=\"j\"", "bad.toml:1: store: expected a table");
  ExpectError("job = 1\n", "bad.toml:1: job: expected a table");
  ExpectError("profile = [1]\n", "bad.toml:1: profile: expected a table");
  ExpectError("[channels]\nhidden = 3\n", "bad.toml:2: channels.hidden: expected a table");
  ExpectError("[actors.a]\nclass = \"x\"\nreplicas = \"two\"\n", "bad.toml:3");
  ExpectError("[actors.a]\nclass = \"x\"\nreplicas = \"two\"\n", "replicas");
  ExpectError("[actors.a]\nclass = \"x\"\nreplicas = 0\n",
              "bad.toml:3: actors.a.replicas: 0 is out of range; expected an integer in [1, 4096]");
  ExpectError("[actors.a]\nreplicas = 1\n", "class");
  ExpectError("[job]\nnmae = \"x\"\n[actors.a]\nclass = \"x\"\n", "bad.toml:2: job.nmae: unknown key; did you mean name?");
  ExpectError("[chanels.h]\ncapacity = 1\n", "bad.toml:1: chanels: unknown key; did you mean channels?");
  ExpectError("[channels.h]\ncapacty = 1\n[actors.a]\nclass = \"x\"\n",
              "bad.toml:2: channels.h.capacty: unknown key; did you mean capacity?");
  ExpectError("[job]\nplugins = [1]\n[actors.a]\nclass = \"x\"\n",
              "bad.toml:2: job.plugins[0]: expected a string, got an integer 1");
  ExpectError("[actors.a]\nclass = \"x\"\nrestart_backoff_s = \"1s\"\n",
              "bad.toml:3: actors.a.restart_backoff_s: expected a finite number in [0, 600]");
  ExpectError("[profile]\ninterval_s = -1\n[actors.a]\nclass = \"x\"\n",
              "bad.toml:2: profile.interval_s: -1 is out of range");
  ExpectError("job = 3\n[actors.a]\nclass = \"x\"\n", "bad.toml:1: job: expected a table");
  ExpectError("[channels.hidden]\ncapacity = 4\n[actors.a]\nclass = \"x\"\nin = \"hiden\"\n",
              "did you mean 'hidden'");
  ExpectError("[channels.h]\ncapacity = 4\nmin_ready = 5\n[actors.a]\nclass = \"x\"\n",
              "min_ready");
  ExpectError("[job]\nname = \"x\"\n", "no [actors.NAME]");
  ExpectError("[actors.a]\nclass = \"x\"\ngpus = 1.5\n", "gpus");
}

// route = "replica": the producer and consumer indices of replicas, and a capacity that
// leaves every reader replica room for min_ready items of its own.
TEST(JobSpecTest, ReplicaRouteChecksCapacityPerReaderAndIndexesPorts) {
  const std::string graph = R"(
[actors.a]
class = "x"
replicas = 2
out = "h"
[actors.b]
class = "x"
replicas = 3
out = "h"
[actors.c]
class = "x"
replicas = 2
in = "h"
)";
  auto job = ParseJobText(
      "[channels.h]\ncapacity = 4\nmin_ready = 2\nroute = \"replica\"\n" + graph, "job.toml");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->channels[0].route, "replica");
  EXPECT_EQ(job->PortReplicas("out", "h"), 5);
  EXPECT_EQ(job->PortReplicas("in", "h"), 2);
  EXPECT_EQ(job->PortIndex("out", "h", "a", 1), 1);
  EXPECT_EQ(job->PortIndex("out", "h", "b", 0), 2);  // after a's two replicas
  EXPECT_EQ(job->PortIndex("in", "h", "c", 1), 1);
  EXPECT_EQ(job->PortIndex("in", "h", "a", 0), -1);  // a writes h, it does not read it
  EXPECT_EQ(job->PortIndex("out", "h", "b", 3), -1);
  ExpectError("[channels.h]\ncapacity = 1\nroute = \"replica\"\n" + graph,
              "bad.toml:2: channels.h.capacity: 1 is too small");
  ExpectError("[channels.h]\ncapacity = 5\nmin_ready = 3\nroute = \"replica\"\n" + graph,
              "bad.toml:3: channels.h.min_ready: 3 exceeds capacity / readers = 5 / 2 = 2");
  ExpectError("[channels.h]\nroute = \"first\"\n" + graph, "channels.h.route");
  auto any = ParseJobText("[channels.h]\ncapacity = 1\n" + graph, "job.toml");
  ASSERT_TRUE(any.ok()) << any.status().ToString();
  EXPECT_EQ(any->channels[0].route, "any");
}

// capacity_mb is shifted into bytes: a value that would overflow the shift is refused (it
// used to wrap to a 1 MiB store), the largest accepted one gives the exact byte count.
TEST(JobSpecTest, StoreCapacityCannotOverflow) {
  ExpectError("[store]\ncapacity_mb = 17592186044416\n[actors.a]\nclass = \"x\"\n",
              "bad.toml:2: store.capacity_mb: 17592186044416 is out of range; expected an "
              "integer in [1, 16777216]");
  ExpectError("[store]\ncapacity_mb = 0\n[actors.a]\nclass = \"x\"\n", "store.capacity_mb");
  auto job = ParseJobText("[store]\ncapacity_mb = 16777216\n[actors.a]\nclass = \"x\"\n", "j");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->store_bytes, int64_t{1} << 44);
}

TEST(JobSpecTest, StoreLargerThanTheMachineIsRefused) {
  auto job = ParseJobText("[store]\ncapacity_mb = 16777216\n[actors.a]\nclass = \"x\"\n", "j.toml");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  Status st = CheckStoreFitsMachine(*job);  // 16 TiB: more than any machine this runs on
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("j.toml: store.capacity_mb: 16777216 MiB"), std::string::npos)
      << st.message();
  EXPECT_FALSE(CheckStoreFitsMachine(*job, int64_t{1} << 40).ok());
  EXPECT_TRUE(CheckStoreFitsMachine(*job, int64_t{1} << 44).ok());
  auto small = ParseJobText("[store]\ncapacity_mb = 16\n[actors.a]\nclass = \"x\"\n", "s");
  ASSERT_TRUE(small.ok());
  EXPECT_TRUE(CheckStoreFitsMachine(*small).ok());
}

// The group keys' declared defaults are filled into the section every reader gets.
TEST(JobSpecTest, GroupDefaultsAreFilledIn) {
  auto job = ParseJobText("[actors.a]\nclass = \"x\"\n", "j.toml");
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  const ConfigValue& s = job->actors[0].settings;
  EXPECT_EQ(*s.GetInt("replicas", -1), 1);
  EXPECT_DOUBLE_EQ(*s.GetDouble("restart_backoff_s", -1), 0.1);
  EXPECT_DOUBLE_EQ(*s.GetDouble("gpus", -1), 0);
  EXPECT_EQ(job->store_bytes, 256 << 20);
}

// 80K keys in one table (1.2 MB) used to take 9 s: every key was inserted after a linear
// search of the ones before. They now parse in one pass; all are kept, in file order.
TEST(JobSpecTest, ManyKeysParseInOnePassAndKeepTheirOrder) {
  constexpr int kKeys = 80000;
  std::string text = "[actors.a]\nclass = \"x\"\n";
  for (int i = kKeys - 1; i >= 0; --i) text += fmt::format("k{} = {}\n", i, i);
  ASSERT_GT(text.size(), size_t{kDefaultMaxJobFileBytes});
  auto capped = ParseJobText(text, "big.toml");
  ASSERT_FALSE(capped.ok());
  EXPECT_NE(capped.status().message().find("larger than the limit of 1048576 bytes"),
            std::string::npos) << capped.status().message();
  auto job = ParseJobText(text, "big.toml", 16 << 20);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  const ConfigValue::Table& t = job->actors[0].settings.table();
  ASSERT_GE(t.size(), size_t{kKeys} + 1);
  EXPECT_EQ(t[0].first, "class");
  EXPECT_EQ(t[1].first, fmt::format("k{}", kKeys - 1));  // file order, not name order
  EXPECT_EQ(t[kKeys].first, "k0");
  EXPECT_EQ(t[kKeys].second.location(), fmt::format("big.toml:{}", kKeys + 2));
}

TEST(JobSpecTest, JobFileSizeIsCapped) {
  // /dev/zero never ends: reading stops at the limit.
  Result<std::string> zero = ReadJobFile("/dev/zero", 4096);
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.status().message().find("/dev/zero: the job file is larger than the limit of "
                                         "4096 bytes"), std::string::npos)
      << zero.status().message();
  auto dir = LoadJobFile(::testing::TempDir());
  ASSERT_FALSE(dir.ok());
  EXPECT_EQ(dir.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(dir.status().message().find("is a directory"), std::string::npos)
      << dir.status().message();
  const testing::ScratchDir scratch;  // not a fixed name: two runs at once share TMPDIR
  const std::string path = scratch.File("small.toml");
  {
    std::ofstream f(path);
    f << "[actors.a]\nclass = \"x\"\n";
  }
  EXPECT_TRUE(LoadJobFile(path, 64).ok());
  auto big = LoadJobFile(path, 16);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("larger than the limit of 16 bytes"), std::string::npos);
  std::filesystem::remove(path);

  ASSERT_EQ(setenv("TANDEM_MAX_JOB_FILE_BYTES", "2048", 1), 0);
  EXPECT_EQ(MaxJobFileBytes(), 2048);
  ASSERT_EQ(setenv("TANDEM_MAX_JOB_FILE_BYTES", "lots", 1), 0);
  EXPECT_EQ(MaxJobFileBytes(), kDefaultMaxJobFileBytes);
  ASSERT_EQ(unsetenv("TANDEM_MAX_JOB_FILE_BYTES"), 0);
  EXPECT_EQ(MaxJobFileBytes(), kDefaultMaxJobFileBytes);
}

std::string DottedKey(int parts) {
  std::string key = "b";
  for (int i = 1; i < parts; ++i) key += ".b";
  return key;
}

TEST(JobSpecTest, DeepNestingIsRefusedNotACrash) {
  // A dotted key of 10,000 parts (a 20 KB file) overflowed the stack converting the parsed
  // table; one of 200,000 overflowed inside the TOML parser itself.
  for (int parts : {10000, 200000}) {
    const std::string text = "[actors.a]\nclass = \"x\"\n\n" + DottedKey(parts) + " = 1\n";
    auto job = ParseJobText(text, "deep.toml");
    ASSERT_FALSE(job.ok());
    const std::string& m = job.status().message();
    EXPECT_EQ(m.rfind("deep.toml:4: b.b.b", 0), 0u) << m.substr(0, 300);
    EXPECT_NE(m.find("nested deeper than 64 levels"), std::string::npos) << m.substr(0, 300);
    EXPECT_LT(m.size(), 400u);
  }
  // Headers, arrays and inline tables count too; strings and comments do not.
  const std::string group = "[actors.a]\nclass = \"x\"\n";
  const std::string deep_cases[] = {
      "[" + DottedKey(70) + "]\nx = 1\n",
      group + "v = " + std::string(70, '[') + std::string(70, ']') + "\n",
      group + "v = [\n" + std::string(70, '[') + "\n" + std::string(71, ']') + "\n",
      group + "t = {" + DottedKey(70) + " = 1}\n",
  };
  for (const std::string& deep : deep_cases) {
    auto job = ParseJobText(deep, "deep.toml");
    ASSERT_FALSE(job.ok()) << deep;
    EXPECT_NE(job.status().message().find("nested deeper than 64"), std::string::npos)
        << job.status().message();
  }
  // The line counts the newlines inside multi-line strings.
  auto after_string = ParseJobText(group + "s = \"\"\"\na\nb\n\"\"\"\n" + DottedKey(100) + " = 1\n",
                                   "deep.toml");
  ASSERT_FALSE(after_string.ok());
  EXPECT_EQ(after_string.status().message().rfind("deep.toml:7: b.b", 0), 0u)
      << after_string.status().message();
  std::string floats;
  for (int i = 0; i < 500; ++i) floats += "1.5, ";
  const std::string shallow_cases[] = {
      group + "s = \"" + DottedKey(500) + "[[[[{{{{\"\n",
      group + "# " + DottedKey(500) + "\n",
      group + "s = '''\n" + std::string(500, '[') + "\n'''\n",
      group + "\"" + DottedKey(500) + "\" = 1\n",
      group + "f = [" + floats + "2.5]\n",
  };
  for (const std::string& shallow : shallow_cases) {
    auto job = ParseJobText(shallow, "ok.toml");
    if (!job.ok()) {
      EXPECT_EQ(job.status().message().find("nested deeper"), std::string::npos)
          << job.status().message();
    }
  }
  // [actors.a] is 2 deep: a key of 62 parts puts its value at 64, the limit; 63 is refused.
  auto at_limit = ParseJobText(group + DottedKey(62) + " = 1\n", "ok.toml");
  if (!at_limit.ok()) {
    EXPECT_EQ(at_limit.status().message().find("nested deeper"), std::string::npos)
        << at_limit.status().message();
  }
  auto past = ParseJobText(group + DottedKey(63) + " = 1\n", "deep.toml");
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.status().message().find("nested deeper"), std::string::npos);
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
