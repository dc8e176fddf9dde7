#include "runtime/actor/config_keys.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <gtest/gtest.h>

namespace tandem {
namespace {

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << (haystack)

KeyTable Demo() {
  KeyTable t("demo");
  t.String("in", "channel").Required();
  t.Int("block_size", "slots per block").Default(16).Range(2, 64);
  t.Number("lr", "learning rate").Default(6e-4).Min(0);
  t.String("mode", "how").Default("split").OneOf({"split", "truncate"});
  t.StringArray("kinds", "per layer").OneOf({"full", "sliding"});
  t.IntArray("layers", "ids").Min(0);
  t.Int("seed", "seed").DefaultIs("[job] seed");
  KeyTable sub("checkpoint");
  sub.String("dir", "where").Default("");
  sub.Int("every_steps", "how often").Default(0).Min(0);
  t.Table("checkpoint", "checkpointing").Keys(sub);
  return t;
}

// A section as the job loader builds it: every value knows its line.
ConfigValue Section(std::vector<std::pair<std::string, ConfigValue>> kv) {
  ConfigValue s = ConfigValue::MakeTable();
  s.set_location("job.toml:3");
  int line = 4;
  for (auto& [k, v] : kv) {
    v.set_location("job.toml:" + std::to_string(line++));
    s.Set(k, std::move(v));
  }
  return s;
}

std::string Problems(const KeyTable& t, const ConfigValue& s) {
  Status st = t.Check(s, "actors.d");
  return st.ok() ? "" : std::string(st.message());
}

TEST(KeyTableTest, AcceptsDeclaredKeysAndReturnsDefaults) {
  KeyTable t = Demo();
  ConfigValue s = Section({{"in", "hidden"}, {"lr", 1}, {"kinds", ConfigValue::Array{"full"}}});
  ASSERT_EQ(Problems(t, s), "");
  EXPECT_EQ(t.GetString(s, "in"), "hidden");
  EXPECT_EQ(t.GetInt(s, "block_size"), 16);      // the declared default
  EXPECT_DOUBLE_EQ(t.GetNumber(s, "lr"), 1.0);    // an integer is a number
  EXPECT_EQ(t.GetString(s, "mode"), "split");
  EXPECT_FALSE(t.GetOptInt(s, "seed").has_value());  // computed default: the caller's
  ConfigValue filled = t.WithDefaults(s);
  EXPECT_EQ(*filled.GetInt("block_size", -1), 16);
  EXPECT_FALSE(filled.Has("seed"));
}

TEST(KeyTableTest, UnknownKeyNamesFileLineAndNearestKey) {
  KeyTable t = Demo();
  EXPECT_EQ(Problems(t, Section({{"in", "h"}, {"blok_size", 8}})),
            "job.toml:5: actors.d.blok_size: unknown key; did you mean block_size?");
  EXPECT_EQ(Problems(t, Section({{"in", "h"}, {"zzzzzzzz", 8}})),
            "job.toml:5: actors.d.zzzzzzzz: unknown key");
  // Keys of the extra table (the group keys) are accepted and suggested.
  KeyTable group("group");
  group.Int("replicas", "copies").Default(1).Min(1);
  ConfigValue s = Section({{"in", "h"}, {"replicas", 2}, {"replica", 2}});
  Status st = t.Check(s, "actors.d", &group);
  EXPECT_EQ(st.message(), "job.toml:6: actors.d.replica: unknown key; did you mean replicas?");
  EXPECT_TRUE(t.Check(s, "actors.d", &group, /*unknown_ok=*/true).ok());
}

TEST(KeyTableTest, IllTypedAndOutOfRangeValues) {
  KeyTable t = Demo();
  EXPECT_EQ(Problems(t, Section({{"in", "h"}, {"block_size", "8"}})),
            "job.toml:5: actors.d.block_size: expected an integer in [2, 64], got a string \"8\"");
  EXPECT_EQ(Problems(t, Section({{"in", "h"}, {"block_size", 1.5}})),
            "job.toml:5: actors.d.block_size: expected an integer in [2, 64], got a number 1.5");
  EXPECT_EQ(Problems(t, Section({{"in", "h"}, {"block_size", 65}})),
            "job.toml:5: actors.d.block_size: 65 is out of range; expected an integer in [2, 64]");
  EXPECT_EQ(Problems(t, Section({{"in", "h"}, {"lr", -0.1}})),
            "job.toml:5: actors.d.lr: -0.1 is out of range; expected a finite number >= 0");
  EXPECT_CONTAINS(Problems(t, Section({{"in", "h"}, {"lr", std::nan("")}})), "out of range");
  EXPECT_CONTAINS(
      Problems(t, Section({{"in", "h"}, {"lr", std::numeric_limits<double>::infinity()}})),
      "out of range");
  EXPECT_EQ(Problems(t, Section({{"in", "h"}, {"mode", "cut"}})),
            "job.toml:5: actors.d.mode: \"cut\" is out of range; expected one of \"split\", "
            "\"truncate\"");
  EXPECT_EQ(Problems(t, Section({{"in", "h"}, {"kinds", ConfigValue::Array{"full", "slide"}}})),
            "job.toml:5: actors.d.kinds[1]: \"slide\" is out of range; expected an array of "
            "strings, each one of \"full\", \"sliding\"");
  EXPECT_EQ(Problems(t, Section({{"in", "h"}, {"layers", ConfigValue::Array{1, -2}}})),
            "job.toml:5: actors.d.layers[1]: -2 is out of range; expected an array of integers "
            ">= 0");
  EXPECT_EQ(Problems(t, Section({{"in", true}})),
            "job.toml:4: actors.d.in: expected a string, got a boolean true");
  EXPECT_EQ(Problems(t, Section({{"block_size", 4}})),
            "job.toml:3: actors.d: missing required key 'in' (channel)");
}

TEST(KeyTableTest, BoolOrStringTakesABooleanOrAnAllowedString) {
  KeyTable t("demo");
  t.BoolOrString("resume", "continue").Default(false).OneOf({"force"});
  EXPECT_EQ(Problems(t, Section({{"resume", true}})), "");
  EXPECT_EQ(Problems(t, Section({{"resume", false}})), "");
  EXPECT_EQ(Problems(t, Section({{"resume", "force"}})), "");
  EXPECT_CONTAINS(Problems(t, Section({{"resume", "yes"}})),
                  "job.toml:4: actors.d.resume: \"yes\" is out of range; expected a boolean "
                  "(true or false) or one of \"force\"");
  EXPECT_CONTAINS(Problems(t, Section({{"resume", 1}})),
                  "actors.d.resume: expected a boolean (true or false) or one of \"force\", "
                  "got an integer");
}

TEST(KeyTableTest, NestedTablesAreChecked) {
  KeyTable t = Demo();
  ConfigValue ck = ConfigValue::MakeTable();
  ck.set_location("job.toml:9");
  ck.Set("dri", "runs");
  ck.Set("every_steps", -1);
  EXPECT_EQ(Problems(t, Section({{"in", "h"}, {"checkpoint", ck}})),
            "job.toml:5: actors.d.checkpoint.dri: unknown key; did you mean dir?\n"
            "job.toml:5: actors.d.checkpoint.every_steps: -1 is out of range; expected an "
            "integer >= 0");
  EXPECT_EQ(Problems(t, Section({{"in", "h"}, {"checkpoint", 3}})),
            "job.toml:5: actors.d.checkpoint: expected a table, got an integer 3");
}

TEST(KeyTableTest, ReportsEveryProblemUpToACap) {
  KeyTable t = Demo();
  ConfigValue s = Section({{"in", "h"}});
  for (int i = 0; i < 1000; ++i) s.Set("bad" + std::to_string(i), i);
  std::string msg = Problems(t, s);
  EXPECT_EQ(std::count(msg.begin(), msg.end(), '\n'), KeyTable::kMaxReported);
  EXPECT_CONTAINS(msg, "actors.d.bad0: unknown key");
  EXPECT_CONTAINS(msg, "... and 990 more problems in actors.d");
}

TEST(KeyTableTest, MarkdownListsEveryKeyWithTypeRangeDefaultAndDoc) {
  std::string md = Demo().Markdown();
  EXPECT_CONTAINS(md, "| `block_size` | integer | in [2, 64] | `16` | slots per block |");
  EXPECT_CONTAINS(md, "| `in` | string |  | required | channel |");
  EXPECT_CONTAINS(md, "| `mode` | string | `split`, `truncate` | `\"split\"` | how |");
  EXPECT_CONTAINS(md, "| `seed` | integer |  | [job] seed | seed |");
  EXPECT_CONTAINS(md, "| `checkpoint.every_steps` | integer | >= 0 | `0` | how often |");
}

TEST(KeyTableTest, DidYouMean) {
  EXPECT_EQ(EditDistance("blok_size", "block_size"), 1u);
  EXPECT_EQ(DidYouMean("anchor_per_batch", {"anchors_per_batch", "block_size"}),
            "anchors_per_batch");
  EXPECT_EQ(DidYouMean("zzzzzz", {"replicas", "class"}), "");
  EXPECT_EQ(DidYouMean("k8", {"in", "out"}), "");
  EXPECT_EQ(DidYouMean("nmae", {"name", "seed"}), "name");
}

}  // namespace
}  // namespace tandem
