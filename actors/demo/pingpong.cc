#include "actors/demo/pingpong.h"

#include <atomic>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "actors/demo/consumer_faults.h"
#include "runtime/actor/registry.h"
#include "runtime/actor/system.h"
#include "runtime/job/job_actor.h"
#include "runtime/core/clock.h"
#include "runtime/core/logging.h"

namespace tandem::demo {

uint64_t Checksum(const uint8_t* data, uint64_t bytes) {
  uint64_t h = 1469598103934665603ull;
  uint64_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w;
    std::memcpy(&w, data + i, 8);
    h = (h ^ w) * 1099511628211ull;
  }
  for (; i < bytes; ++i) h = (h ^ data[i]) * 1099511628211ull;
  return h;
}

void FillObject(uint8_t* data, uint64_t bytes, uint64_t seed, uint64_t replica, uint64_t index) {
  // splitmix64 stream: cheap, and every object differs.
  uint64_t x = seed * 0x9E3779B97F4A7C15ull ^ (replica << 40) ^ index;
  uint64_t i = 0;
  auto next = [&x] {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  for (; i + 8 <= bytes; i += 8) {
    uint64_t w = next();
    std::memcpy(data + i, &w, 8);
  }
  for (; i < bytes; ++i) data[i] = static_cast<uint8_t>(next());
}

namespace {

KeyTable ProducerKeys() {
  KeyTable t("demo.producer", "fills store objects with seeded bytes and pushes their refs");
  t.String("out", "channel the refs of filled objects go to").Required();
  t.Int("objects", "objects per replica; also gives `tandem status` its item total")
      .Default(1000).Min(0);
  t.Int("object_bytes", "bytes per object").Default(65536).Range(1, int64_t{1} << 32);
  return t;
}

KeyTable ConsumerKeys() {
  KeyTable t("demo.consumer", "pops refs, verifies every object's checksum, releases them");
  t.String("in", "channel the refs come from").Required();
  return t;
}

class Producer final : public JobActor {
 public:
  explicit Producer(const ConfigValue& s, const ActorContext& ctx) : settings_(s) {}

  Result<std::string> Run(JobEnv* env) override {
    static const KeyTable keys = ProducerKeys();
    RETURN_IF_ERROR(keys.Check(settings_, "actors." + context().group, &ActorGroupKeys()));
    const std::string out = keys.GetString(settings_, "out");
    const int64_t objects = keys.GetInt(settings_, "objects");
    const int64_t bytes = keys.GetInt(settings_, "object_bytes");
    ASSIGN_OR_RETURN(auto channel, env->channels->Open<DemoItem>(out));
    StageHandle fill = env->profile->Stage("demo.produce");
    StageHandle push_wait = env->profile->Stage("demo.push_wait");
    for (int64_t i = 0; i < objects; ++i) {
      if (env->stopping() || stop_requested()) return CancelledError("{}: stopped", name());
      SetStage("demo.produce");
      DemoItem item;
      {
        ScopedTimer t(fill);
        ASSIGN_OR_RETURN(MutableObject obj, env->store->Create(bytes, name()));
        FillObject(obj.data(), bytes, env->job->seed, context().replica, i);
        item.checksum = Checksum(obj.data(), bytes);
        item.index = i;
        item.ref = obj.Seal();
      }
      SetStage("demo.push_wait");
      ScopedTimer t(push_wait);
      RETURN_IF_ERROR(channel->Push(std::move(item)));
    }
    return fmt::format("produced {} objects ({})", objects, FormatBytes(objects * bytes));
  }

 private:
  ConfigValue settings_;
};

class Consumer final : public JobActor {
 public:
  explicit Consumer(const ConfigValue& s, const ActorContext& ctx) : settings_(s) {}

  Result<std::string> Run(JobEnv* env) override {
    static const KeyTable keys = ConsumerKeys();
    RETURN_IF_ERROR(keys.Check(settings_, "actors." + context().group, &ActorGroupKeys()));
    const std::string in = keys.GetString(settings_, "in");
    // A fault a test installed in the job's registry (consumer_faults.h); none otherwise.
    ConsumerFaults& faults = env->registry->Get<ConsumerFaults>();
    const int64_t fail_at = faults.Get().fail_at;
    ASSIGN_OR_RETURN(auto channel, env->channels->Open<DemoItem>(in));
    const ChannelSpec* spec = env->job->FindChannel(in);
    StageHandle get = env->profile->Stage("demo.queue_get");
    StageHandle verify = env->profile->Stage("demo.verify");
    while (true) {
      SetStage("demo.queue_get");
      ScopedTimer wait(get);
      Result<std::vector<DemoItem>> batch =
          channel->PopBatch(static_cast<size_t>(spec->capacity), std::chrono::milliseconds(200));
      wait.Stop();
      if (!batch.ok()) {
        if (batch.status().code() == StatusCode::kDeadlineExceeded) {
          if (env->stopping() || stop_requested()) return CancelledError("{}: stopped", name());
          continue;
        }
        break;  // closed and drained
      }
      SetStage("demo.verify");
      ScopedTimer t(verify);
      for (DemoItem& item : *batch) {
        uint64_t sum = Checksum(item.ref.data(), item.ref.size());
        if (sum != item.checksum) {
          return DataLossError("{}: object {} (#{} of '{}') checksum {:016x}, expected {:016x}",
                               name(), item.ref.id().ToString(), item.index, item.ref.owner(),
                               sum, item.checksum);
        }
        ++consumed_total_;
        bytes_total_ += item.ref.size();
        if (fail_at >= 0 && consumed_total_ == static_cast<uint64_t>(fail_at)) {
          if (faults.ClaimThrow(name()))
            throw std::runtime_error(fmt::format("fail_at={} reached (deliberate)", fail_at));
        }
      }
    }
    return fmt::format("consumed {} objects ({}), all checksums match", consumed_total_,
                       FormatBytes(bytes_total_));
  }

 private:
  ConfigValue settings_;
  // Survive nothing: a restarted consumer counts from zero (its earlier items were verified).
  uint64_t consumed_total_ = 0;
  uint64_t bytes_total_ = 0;
};

}  // namespace

TANDEM_REGISTER_ACTOR(Producer, "demo.producer", ProducerKeys());
TANDEM_REGISTER_ACTOR(Consumer, "demo.consumer", ConsumerKeys());

}  // namespace tandem::demo
