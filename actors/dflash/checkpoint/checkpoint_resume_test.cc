// Resume trusts nothing it reads. The tiny CPU job through JobRunner:
// `latest` missing resumes from the newest complete step and says so; no step directory is
// ever overwritten; a different job identity or drafter config is refused unless
// resume = "force"; flipped bytes in a tensor file are caught by its digest; a hand-edited
// state file is DataLoss naming the file and the field.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "actors/dflash/checkpoint/checkpoint_resume.h"
#include "actors/dflash/checkpoint/checkpoint_state.h"
#include "actors/dflash/job_test_util.h"
#include "models/io/file_digest.h"

namespace tandem::dflash {
namespace {

namespace fs = std::filesystem;
using testing::FreshDir;

Result<JobReport> RunTiny(const std::string& dir, int max_steps, const std::string& extra,
                      const std::string& target_extra = "") {
  return testing::RunJob({.name = "resume-test",
                          .batches_per_epoch = 100,
                          .max_steps = max_steps,
                          .checkpoint_dir = dir,
                          .checkpoint_every = 10,
                          .target_extra = target_extra,
                          .drafter_extra = extra});
}

std::string Text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::trunc) << text;
}

uint64_t Digest(const std::string& path) { return models::FileXxh3(path).value(); }

// A directory with steps 10, 20 and 30 of the tiny job, `latest` naming step 30.
std::string ThreeSteps(const std::string& name) {
  const std::string dir = FreshDir(name);
  auto r = RunTiny(dir, 30, "");
  EXPECT_TRUE(r.ok() && r->status.ok()) << (r.ok() ? r->ToString() : r.status().ToString());
  return dir;
}

TEST(CheckpointResumeTest, LatestMissingResumesFromTheNewestCompleteStep) {
  const std::string dir = ThreeSteps("resume_no_latest");
  const uint64_t before = Digest(dir + "/step_00000020/model.safetensors");
  fs::remove(dir + "/latest");
  auto r = RunTiny(dir, 40, "resume = true\n");
  ASSERT_TRUE(r.ok() && r->status.ok()) << r->ToString();
  // Resumed at 30, not restarted at 0 (which would have rewritten steps 10..30).
  EXPECT_NE(r->actors[1].summary.find("steps 40 (from 30)"), std::string::npos) << r->ToString();
  EXPECT_EQ(Digest(dir + "/step_00000020/model.safetensors"), before);
  EXPECT_EQ(Text(dir + "/latest"), "step_00000040\n");
}

TEST(CheckpointResumeTest, NeverOverwritesAStepDirectory) {
  const std::string dir = ThreeSteps("resume_no_overwrite");
  // `latest` one step behind a complete step 30: continuing from 20 would rewrite step 30.
  Write(dir + "/latest", "step_00000020\n");
  const uint64_t before = Digest(dir + "/step_00000030/optimizer.safetensors");
  auto r = RunTiny(dir, 40, "resume = true\n");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->status.ok());
  EXPECT_NE(r->ToString().find(dir + "/step_00000030: a checkpoint newer than the resume point"),
            std::string::npos)
      << r->ToString();
  EXPECT_EQ(Digest(dir + "/step_00000030/optimizer.safetensors"), before);

  // An incomplete newer step (no tandem_state.json: its write was interrupted) is removed.
  fs::remove(dir + "/step_00000030/tandem_state.json");
  auto again = RunTiny(dir, 40, "resume = true\n");
  ASSERT_TRUE(again.ok() && again->status.ok()) << again->ToString();
  EXPECT_NE(again->actors[1].summary.find("(from 20)"), std::string::npos) << again->ToString();
  EXPECT_TRUE(fs::exists(dir + "/step_00000030/tandem_state.json"));

  // A fresh run (resume = false) moves the earlier run aside instead of writing over it.
  const uint64_t step20 = Digest(dir + "/step_00000020/model.safetensors");
  auto fresh = RunTiny(dir, 20, "");
  ASSERT_TRUE(fresh.ok() && fresh->status.ok()) << fresh->ToString();
  int previous = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("previous-")) {
      ++previous;
      EXPECT_EQ(Digest(e.path().string() + "/step_00000020/model.safetensors"), step20);
      EXPECT_EQ(Text(e.path().string() + "/latest"), "step_00000040\n");
    }
  }
  EXPECT_EQ(previous, 1);
  EXPECT_FALSE(fs::exists(dir + "/step_00000030"));
  EXPECT_EQ(Text(dir + "/latest"), "step_00000020\n");
}

TEST(CheckpointResumeTest, ADifferentJobIsRefusedUnlessForced) {
  const std::string dir = ThreeSteps("resume_identity");
  struct Case {
    std::string drafter, target, part;
  };
  const std::vector<Case> cases = {
      {"seed = 7\n", "", "seed 1 (checkpoint) vs 7 (this job)"},
      {"mask_token_id = 100\n", "", "\"mask_token_id\":127"},
  };
  for (const Case& c : cases) {
    auto r = RunTiny(dir, 40, "resume = true\n" + c.drafter, c.target);
    ASSERT_TRUE(r.ok());
    EXPECT_FALSE(r->status.ok()) << c.part;
    EXPECT_NE(r->ToString().find(c.part), std::string::npos) << r->ToString();
    EXPECT_NE(r->ToString().find("resume = \"force\""), std::string::npos) << r->ToString();
  }
  // Other captured target layers, replicas or data: the identity saved with the step.
  auto saved = ReadLatestState(dir);
  ASSERT_TRUE(saved.ok() && saved->has_value()) << saved.status().ToString();
  auto config = models::LoadDFlashConfig(dir + "/step_00000030/config.json");
  ASSERT_TRUE(config.ok()) << config.status().ToString();
  RunIdentity other = *(*saved)->identity;
  other.target_layer_ids = {1, 3};
  other.target_replicas = 2;
  auto refused = CheckSameJob(**saved, other, *config, ResumeMode::kOn);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("target layers [1, 4] (checkpoint) vs [1, 3] (this "
                                            "job); target replicas 1 (checkpoint) vs 2"),
            std::string::npos)
      << refused.status().ToString();
  auto note = CheckSameJob(**saved, other, *config, ResumeMode::kForce);
  ASSERT_TRUE(note.ok());
  EXPECT_NE(note->find("target layers [1, 4]"), std::string::npos) << *note;
  auto same = CheckSameJob(**saved, *(*saved)->identity, *config, ResumeMode::kOn);
  ASSERT_TRUE(same.ok() && same->empty()) << (same.ok() ? *same : same.status().ToString());

  // The same job resumes; "force" resumes a different one (and logs why).
  auto resumed = RunTiny(dir, 40, "resume = true\n");
  ASSERT_TRUE(resumed.ok() && resumed->status.ok()) << resumed->ToString();
  auto forced = RunTiny(dir, 50, "resume = \"force\"\nseed = 7\n");
  ASSERT_TRUE(forced.ok() && forced->status.ok()) << forced->ToString();
  EXPECT_NE(forced->actors[1].summary.find("(from 40)"), std::string::npos) << forced->ToString();
}

TEST(CheckpointResumeTest, FlippedBytesInATensorFileAreCaught) {
  const std::string dir = ThreeSteps("resume_flipped");
  const std::string opt = dir + "/step_00000030/optimizer.safetensors";
  const uint64_t size = fs::file_size(opt);
  {
    std::fstream f(opt, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(size - 200));
    const std::string flipped(64, '\x5a');
    f.write(flipped.data(), 64);
  }
  auto r = RunTiny(dir, 40, "resume = true\n");
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(r->status.ok());
  EXPECT_NE(r->ToString().find(opt + ": XXH3-64 digest"), std::string::npos) << r->ToString();
}

TEST(CheckpointResumeTest, AHandEditedStateFileNamesTheFileAndField) {
  const std::string dir = ThreeSteps("resume_edited");
  const std::string state = dir + "/step_00000030/tandem_state.json";
  const std::string good = Text(state);
  std::string edited = good;
  edited.replace(edited.find("\"step\": 30"), 10, "\"step\": 1e30");
  Write(state, edited);
  auto r = RunTiny(dir, 40, "resume = true\n");
  // The resume point is read before any actor starts (the job's prepare step), so the job
  // does not start; the error names the file and the field.
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(state + ": field 'step': expected an integer, got number 1e+30"),
            std::string::npos)
      << r.status().ToString();
}

// The state file's parser on its own: every malformed field is DataLoss naming it.
TEST(CheckpointStateTest, EveryFieldIsValidated) {
  ResumeState st;
  st.step = 20;
  st.tokens = 5120;
  st.positions[0] = {0, 20};
  st.identity = RunIdentity{1, "random", {1, 4}, 1, 256, "synthetic"};
  st.files["model.safetensors"] = {123, 0x0123456789abcdefull};
  const std::string good = SerializeResumeState(st);
  auto back = ParseResumeState(good, "s.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->positions, st.positions);
  EXPECT_EQ(back->identity, st.identity);
  EXPECT_EQ(back->files, st.files);

  struct Case {
    std::string from, to, part;
  };
  const std::vector<Case> cases = {
      {"\"step\": 20", "\"step\": 1e30", "field 'step': expected an integer, got number 1e+30"},
      {"\"step\": 20", "\"step\": -1", "field 'step': -1 is outside [0, "},
      {"\"step\": 20", "\"step\": 20.0", "field 'step': expected an integer"},
      {"\"step\": 20", "\"step\": \"20\"", "field 'step': expected an integer, got string"},
      {"\"0\": {", "\"x\": {", "field 'positions.x': 'x' is not a target replica number"},
      {"\"0\": {", "\"01\": {", "field 'positions.01'"},
      {"\"next_batch\": 20", "\"next_batch\": 9223372036854775807",
       "field 'positions.0.next_batch'"},
      {"\"tokens\": 5120", "\"tokens\": 5120, \"stpe\": 3", "field 'stpe': unknown field"},
      {"\"xxh3_64\": \"0123456789abcdef\"", "\"xxh3_64\": \"xyz\"",
       "field 'files.model.safetensors.xxh3_64': expected 16 hex digits"},
      {"\"model.safetensors\"", "\"../model.safetensors\"", "not a file name inside"},
      {"\"seed\": 1", "\"seed\": -1", "field 'identity.seed'"},
      {"\"format\": \"tandem-dflash-job\"", "\"format\": \"other\"", "field 'format'"},
      {"\"version\": 2", "\"version\": 3", "field 'version': 3 is outside [1, 2]"},
      {"{", "[", "not valid JSON"},
  };
  for (const Case& c : cases) {
    std::string text = good;
    const size_t at = text.find(c.from);
    ASSERT_NE(at, std::string::npos) << c.from;
    text.replace(at, c.from.size(), c.to);
    auto r = ParseResumeState(text, "s.json");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kDataLoss) << r.status().ToString();
    EXPECT_NE(r.status().message().find("s.json: "), std::string::npos) << r.status().ToString();
    EXPECT_NE(r.status().message().find(c.part), std::string::npos) << r.status().ToString();
  }
  EXPECT_EQ(StepOfDirName("step_00000020"), 20);
  EXPECT_EQ(StepOfDirName("step_123456789"), 123456789);
  EXPECT_FALSE(StepOfDirName("step_0020").has_value());
  EXPECT_FALSE(StepOfDirName("../step_00000020").has_value());
  EXPECT_FALSE(StepOfDirName("step_-0000020").has_value());
}

}  // namespace
}  // namespace tandem::dflash
