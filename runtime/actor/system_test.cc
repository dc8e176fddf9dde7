// ActorSystem: the registry, spawning groups from config sections, lookups, and plugins.
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "runtime/actor/actor_test_util.h"
#include "runtime/actor/plugin.h"
#include "runtime/actor/system.h"

namespace tandem {
namespace {

using namespace std::chrono_literals;
using testing::ActorFixture;
using testing::LiveCounted;

class Counter : public Actor, public LiveCounted {
 public:
  static Result<std::unique_ptr<Counter>> Create(const ConfigValue& section,
                                                 const ActorContext& ctx) {
    ASSIGN_OR_RETURN(int64_t start, section.GetInt("start", 0));
    ASSIGN_OR_RETURN(int64_t fail_replica, section.GetInt("fail_replica", -1));
    if (ctx.replica == fail_replica) {
      return InvalidArgumentError("replica {} refuses to start", ctx.replica);
    }
    return std::make_unique<Counter>(start + ctx.replica);
  }
  explicit Counter(int64_t start) : value_(start) {}
  int64_t Next() { return value_++; }
  std::string Where() { return fmt::format("{} {} {}", context().group, context().replica,
                                           context().class_name); }

 private:
  int64_t value_;
};
TANDEM_REGISTER_ACTOR(Counter, "test.counter");

class Other : public Actor, public LiveCounted {};
TANDEM_REGISTER_ACTOR(Other, "test.other");

class Throwing : public Actor {
 public:
  Throwing() { throw std::runtime_error("constructor failed"); }
};

ConfigValue CounterSection(int replicas) {
  ConfigValue s = ConfigValue::MakeTable();
  s.set_location("job.toml:3");
  s.Set("class", "test.counter");
  s.Set("replicas", replicas);
  s.Set("start", 100);
  return s;
}

TEST_F(ActorFixture, SpawnGroupFromSectionAndLookUpReplicas) {
  ActorSystem sys(ActorSystem::Options{.cpu_threads = 2});
  auto refs = sys.SpawnGroup("counter", CounterSection(3));
  ASSERT_TRUE(refs.ok()) << refs.status().ToString();
  ASSERT_EQ(refs->size(), 3u);
  EXPECT_EQ((*refs)[2].name(), "counter/2");
  auto c1 = sys.Lookup<Counter>("counter/1");
  ASSERT_TRUE(c1.ok()) << c1.status().ToString();
  EXPECT_EQ(*c1->call(&Counter::Next).Get(), 101);
  EXPECT_EQ(*c1->call(&Counter::Next).Get(), 102);
  EXPECT_EQ(*c1->call(&Counter::Where).Get(), "counter 1 test.counter");

  std::vector<ActorInfo> snap = sys.Snapshot();
  ASSERT_EQ(snap.size(), 3u);
  EXPECT_EQ(snap[0].name, "counter/0");
  EXPECT_EQ(snap[0].class_name, "test.counter");

  Result<ActorRef> missing = sys.Lookup("counter/9");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("counter/0, counter/1, counter/2"),
            std::string::npos);
  auto wrong = sys.Lookup<Other>("counter/0");
  EXPECT_EQ(wrong.status().code(), StatusCode::kInvalidArgument);

  EXPECT_TRUE(sys.StopAll(10s).ok());
  for (const ActorInfo& i : sys.Snapshot()) EXPECT_EQ(i.state, ActorState::kStopped);
}

TEST_F(ActorFixture, SpawnErrorsAreClear) {
  ActorSystem sys(ActorSystem::Options{.cpu_threads = 2});
  ConfigValue unknown = CounterSection(1);
  unknown.Set("class", "test.nope");
  Result<std::vector<ActorRef>> r = sys.SpawnGroup("x", unknown);
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("no actor class 'test.nope'"), std::string::npos);
  EXPECT_NE(r.status().message().find("test.counter"), std::string::npos);

  ConfigValue bad_type = CounterSection(1);
  bad_type.Set("replicas", "three");
  r = sys.SpawnGroup("x", bad_type);
  EXPECT_EQ(r.status().message(), "job.toml:3: actors.x.replicas: expected an integer in "
                                  "[1, 4096], got a string \"three\"");

  ConfigValue no_class = ConfigValue::MakeTable();
  r = sys.SpawnGroup("x", no_class);
  EXPECT_EQ(r.status().message().find("actors.x: missing required key 'class'"), 0u)
      << r.status().message();

  ASSERT_TRUE(sys.Spawn("test.other", "dup", ConfigValue::MakeTable()).ok());
  Result<ActorRef> dup = sys.Spawn("test.other", "dup", ConfigValue::MakeTable());
  EXPECT_EQ(dup.status().message(), "an actor named 'dup' already exists");

  auto thrown = sys.SpawnActor<Throwing>("throwing");
  EXPECT_EQ(thrown.status().code(), StatusCode::kInternal);
  EXPECT_NE(thrown.status().message().find("constructor failed"), std::string::npos);

  ActorOptions gpu;
  gpu.gpu = 0;
  gpu.make_device_current = false;
  auto gpu_thrown = sys.SpawnActor<Throwing>("throwing-gpu", gpu);
  EXPECT_NE(gpu_thrown.status().message().find("constructor failed"), std::string::npos);
  EXPECT_EQ(sys.Snapshot().size(), 1u);  // only "dup"
}

// restart_backoff_s (seconds) is the one backoff key, and it reaches the supervisor.
TEST_F(ActorFixture, SpawnGroupAppliesRestartBackoff) {
  ActorSystem sys(ActorSystem::Options{.cpu_threads = 2});
  ConfigValue s = CounterSection(2);
  s.Set("max_restarts", 3);
  s.Set("restart_backoff_s", 0.25);
  ASSERT_TRUE(sys.SpawnGroup("counter", s).ok());
  ConfigValue d = CounterSection(1);
  ASSERT_TRUE(sys.SpawnGroup("default", d).ok());
  for (const ActorInfo& i : sys.Snapshot()) {
    EXPECT_EQ(i.restart_backoff, i.name.rfind("counter", 0) == 0
                                     ? std::chrono::milliseconds(250)
                                     : std::chrono::milliseconds(100))
        << i.name;
  }
  ConfigValue bad = CounterSection(1);
  bad.Set("restart_backoff_s", -1);
  Result<std::vector<ActorRef>> r = sys.SpawnGroup("bad", bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("restart_backoff_s: -1 is out of range"), std::string::npos)
      << r.status().message();
  EXPECT_TRUE(sys.StopAll(10s).ok());
}

TEST_F(ActorFixture, SpawnGroupIsAllOrNothing) {
  ActorSystem sys(ActorSystem::Options{.cpu_threads = 2});
  ConfigValue s = CounterSection(4);
  s.Set("fail_replica", 2);
  Result<std::vector<ActorRef>> r = sys.SpawnGroup("counter", s);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("replica 2 refuses to start"), std::string::npos);
  EXPECT_NE(r.status().message().find("actors.counter"), std::string::npos);
  EXPECT_TRUE(sys.Snapshot().empty());
  // The names are free again.
  EXPECT_TRUE(sys.SpawnGroup("counter", CounterSection(2)).ok());
}

TEST_F(ActorFixture, SpawnGroupPinsReplicasToGivenGpus) {
  ActorSystem sys(ActorSystem::Options{.cpu_threads = 2});
  auto refs = sys.SpawnGroup("counter", CounterSection(2), {3, 5}, /*make_device_current=*/false);
  ASSERT_TRUE(refs.ok()) << refs.status().ToString();
  EXPECT_EQ((*refs)[0].Info().gpu, 3);
  EXPECT_EQ((*refs)[1].Info().gpu, 5);
  EXPECT_FALSE(sys.SpawnGroup("more", CounterSection(2), {1}).ok());
}

TEST(RegistryTest, DuplicateNamesAreRefusedAndRecorded) {
  Status st = ActorRegistry::Global().Register(ActorRegistry::ClassOf<Other>("test.counter"));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("'test.counter' is already registered"), std::string::npos);
  std::vector<std::string> conflicts = ActorRegistry::Global().Conflicts();
  ASSERT_FALSE(conflicts.empty());
  EXPECT_NE(conflicts.back().find("test.counter"), std::string::npos);
}

TEST_F(ActorFixture, PluginRegistersAndSpawns) {
  Result<std::vector<std::string>> classes = LoadPlugin(TANDEM_TEST_PLUGIN);
  ASSERT_TRUE(classes.ok()) << classes.status().ToString();
  EXPECT_EQ(*classes, std::vector<std::string>{"test.plugin_greeter"});
  // Loading again is harmless and reports the same classes.
  EXPECT_EQ(*LoadPlugin(TANDEM_TEST_PLUGIN), *classes);

  ActorSystem sys(ActorSystem::Options{.cpu_threads = 2});
  ConfigValue s = ConfigValue::MakeTable();
  s.Set("class", "test.plugin_greeter");
  s.Set("greeting", "hello");
  auto refs = sys.SpawnGroup("greeter", s);
  ASSERT_TRUE(refs.ok()) << refs.status().ToString();
  ActorRef g = (*refs)[0];
  ASSERT_TRUE(testing::WaitUntil([&] { return g.Info().stage == "greeting=hello"; }))
      << g.Info().stage;
}

TEST(PluginTest, MissingFileAndUnresolvedSymbolsGiveClearErrors) {
  Result<std::vector<std::string>> missing = LoadPlugin("/nonexistent/libnope.so");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("plugin '/nonexistent/libnope.so' not found"),
            std::string::npos);

  Result<std::vector<std::string>> broken = LoadPlugin(TANDEM_TEST_PLUGIN_UNRESOLVED);
  EXPECT_EQ(broken.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(broken.status().message().find("undefined symbol"), std::string::npos)
      << broken.status().message();
  EXPECT_NE(broken.status().message().find("tandem_test_symbol_that_does_not_exist"),
            std::string::npos);
}

}  // namespace
}  // namespace tandem
