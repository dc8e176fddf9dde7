// stats.bytes: an example of a custom actor built outside the tandem tree (see README.md).
// It drains a channel of the pingpong demo (demo::DemoItem refs to store objects) in place of
// demo.consumer: for every object it checks the producer's checksum, then counts the object's
// byte values and reports, when the channel is closed and drained, per-object statistics
// (mean byte value range) and the Shannon entropy of all bytes seen. Seeded random bytes
// should give a mean near 127.5 and close to 8 bits per byte; `min_entropy` turns a lower
// entropy into an error (e.g. to catch a producer writing constant data).
//
// Settings: `in` (channel name, required), `min_entropy` (bits per byte, default 0 = off),
// declared once in ByteStatsKeys(): the job layer refuses any other key, or a value out of
// range, before the job starts, and the actor reads its settings through the same table.
// Thread-safety: each replica runs on its own executor and owns all of its state.
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "actors/demo/pingpong.h"
#include "runtime/actor/registry.h"
#include "runtime/actor/system.h"
#include "runtime/job/job_actor.h"
#include "runtime/core/clock.h"

namespace byte_stats {

using tandem::demo::DemoItem;

tandem::KeyTable ByteStatsKeys() {
  tandem::KeyTable t("stats.bytes", "byte statistics and entropy of a pingpong channel");
  t.String("in", "channel of demo::DemoItem refs to drain").Required();
  t.Number("min_entropy", "fail when the bytes carry fewer bits per byte (0: off)")
      .Default(0.0).Range(0, 8);
  return t;
}

class ByteStats final : public tandem::JobActor {
 public:
  ByteStats(const tandem::ConfigValue& settings, const tandem::ActorContext& ctx)
      : settings_(settings) {}

  tandem::Result<std::string> Run(tandem::JobEnv* env) override {
    static const tandem::KeyTable keys = ByteStatsKeys();
    RETURN_IF_ERROR(keys.Check(settings_, "actors." + context().group, &tandem::ActorGroupKeys()));
    const std::string in = keys.GetString(settings_, "in");
    const double min_entropy = keys.GetNumber(settings_, "min_entropy");
    ASSIGN_OR_RETURN(auto channel, env->channels->Open<DemoItem>(in));
    const tandem::ChannelSpec* spec = env->job->FindChannel(in);
    tandem::StageHandle scan = env->profile->Stage("stats.scan");
    // A restarted replica counts afresh, like demo.consumer: its earlier objects were counted
    // by the instance that failed.
    counts_.fill(0);
    objects_ = 0;
    min_mean_ = std::numeric_limits<double>::infinity();
    max_mean_ = -min_mean_;
    while (true) {
      SetStage("stats.queue_get");
      auto batch = channel->PopBatch(static_cast<size_t>(spec->capacity),
                                     std::chrono::milliseconds(200));
      if (!batch.ok()) {
        if (batch.status().code() != tandem::StatusCode::kDeadlineExceeded) break;  // drained
        if (env->stopping() || stop_requested())
          return tandem::CancelledError("{}: stopped", name());
        continue;
      }
      SetStage("stats.scan");
      tandem::ScopedTimer t(scan);
      for (const DemoItem& item : *batch) RETURN_IF_ERROR(Count(item));
    }
    uint64_t total = 0;
    for (uint64_t c : counts_) total += c;
    const double entropy = Entropy(total);
    if (objects_ > 0 && entropy < min_entropy) {
      return tandem::DataLossError("{}: entropy {:.3f} bits/byte is below min_entropy {:.3f}",
                                   name(), entropy, min_entropy);
    }
    if (objects_ == 0) return std::string("byte stats: no objects");
    return fmt::format(
        "byte stats: {} objects ({}), mean byte {:.2f} (per object {:.2f}..{:.2f}), "
        "entropy {:.4f} bits/byte",
        objects_, tandem::FormatBytes(total), WeightedMean(total), min_mean_, max_mean_,
        entropy);
  }

 private:
  tandem::Status Count(const DemoItem& item) {
    const uint8_t* data = item.ref.data();
    const uint64_t size = item.ref.size();
    if (tandem::demo::Checksum(data, size) != item.checksum) {
      return tandem::DataLossError("{}: object #{} of '{}' fails its checksum", name(),
                                   item.index, item.ref.owner());
    }
    uint64_t sum = 0;
    for (uint64_t i = 0; i < size; ++i) {
      ++counts_[data[i]];
      sum += data[i];
    }
    const double mean = size == 0 ? 0.0 : static_cast<double>(sum) / static_cast<double>(size);
    min_mean_ = std::min(min_mean_, mean);
    max_mean_ = std::max(max_mean_, mean);
    ++objects_;
    return tandem::Status::Ok();
  }

  double WeightedMean(uint64_t total) const {
    double sum = 0;
    for (size_t v = 0; v < counts_.size(); ++v) sum += static_cast<double>(v) * counts_[v];
    return total == 0 ? 0.0 : sum / static_cast<double>(total);
  }

  // Shannon entropy of the byte-value distribution, in bits per byte (0..8).
  double Entropy(uint64_t total) const {
    double h = 0;
    for (uint64_t c : counts_) {
      if (c == 0) continue;
      const double p = static_cast<double>(c) / static_cast<double>(total);
      h -= p * std::log2(p);
    }
    return h;
  }

  tandem::ConfigValue settings_;
  std::array<uint64_t, 256> counts_{};
  uint64_t objects_ = 0;
  double min_mean_ = 0;
  double max_mean_ = 0;
};

TANDEM_REGISTER_ACTOR(ByteStats, "stats.bytes", ByteStatsKeys());

}  // namespace byte_stats
