#include "runtime/actor/config.h"

#include <gtest/gtest.h>

namespace tandem {
namespace {

ConfigValue Section() {
  ConfigValue s = ConfigValue::MakeTable();
  s.set_location("job.toml:7");
  s.Set("class", "dflash.drafter");
  s.Set("replicas", 3);
  s.Set("lr", 6e-4);
  s.Set("train", true);
  s.Set("layers", ConfigValue::Array{1, 9, 17});
  ConfigValue ckpt = ConfigValue::MakeTable();
  ckpt.Set("every_steps", 1000);
  s.Set("checkpoint", ckpt);
  return s;
}

TEST(ConfigValueTest, TypedGettersAndDefaults) {
  ConfigValue s = Section();
  EXPECT_EQ(*s.RequireString("class"), "dflash.drafter");
  EXPECT_EQ(*s.GetInt("replicas", 1), 3);
  EXPECT_EQ(*s.GetInt("missing", 5), 5);
  EXPECT_DOUBLE_EQ(*s.GetDouble("lr", 0), 6e-4);
  EXPECT_DOUBLE_EQ(*s.GetDouble("replicas", 0), 3.0);  // an integer is a number too
  EXPECT_TRUE(*s.GetBool("train", false));
  EXPECT_EQ(*s.GetString("absent", "dflt"), "dflt");
  ASSERT_TRUE(s.Find("layers")->is_array());
  EXPECT_EQ(*s.Find("layers")->array()[1].AsInt(), 9);
  EXPECT_EQ(*s.Find("checkpoint")->GetInt("every_steps", 0), 1000);
  EXPECT_EQ(s.Find("nope"), nullptr);
}

TEST(ConfigValueTest, TypeErrorsNameKeyTypeAndLocation) {
  ConfigValue s = Section();
  Result<int64_t> r = s.GetInt("class", 1);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(r.status().message(), "job.toml:7: key 'class': expected an integer, got a string");

  ConfigValue v = 2.5;
  v.set_location("job.toml:9");
  s.Set("replicas", v);
  EXPECT_EQ(s.GetInt("replicas", 1).status().message(),
            "job.toml:9: key 'replicas': expected an integer, got a number");

  Result<std::string> missing = s.RequireString("model");
  EXPECT_EQ(missing.status().message(), "job.toml:7: missing required key 'model'");
  EXPECT_FALSE(ConfigValue(1).AsString().ok());
  EXPECT_FALSE(ConfigValue("x").AsBool().ok());
}

TEST(ConfigValueTest, SetReplacesAndKeepsOrder) {
  ConfigValue s = ConfigValue::MakeTable();
  s.Set("b", 1);
  s.Set("a", "x");
  s.Set("b", 2);
  EXPECT_EQ(s.ToString(), "{b = 2, a = \"x\"}");
  EXPECT_EQ(Section().Find("layers")->ToString(), "[1, 9, 17]");
}

}  // namespace
}  // namespace tandem
