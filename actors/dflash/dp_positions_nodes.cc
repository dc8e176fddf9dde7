#include "actors/dflash/dp_positions_nodes.h"

#include <cstdint>
#include <utility>
#include <vector>

#include "runtime/cluster/gloo_group.h"

namespace tandem::dflash {
namespace {

// One writer's entry in the exchanged buffer: present (0/1), epoch, next_batch.
constexpr int kWords = 3;

}  // namespace

DataPositionsAcrossNodes::DataPositionsAcrossNodes(std::string group, int writers,
                                                   std::unique_ptr<cluster::GlooGroup> gloo)
    : group_(std::move(group)), writers_(writers), gloo_(std::move(gloo)) {}

DataPositionsAcrossNodes::~DataPositionsAcrossNodes() = default;

Result<std::unique_ptr<DataPositionsAcrossNodes>> DataPositionsAcrossNodes::Join(
    cluster::ClusterNode& node, const std::string& group, int nranks, int rank, int writers,
    const std::string& address, Duration timeout) {
  if (writers < 1)
    return InvalidArgumentError("data positions of group {}: {} channel writers", group,
                                writers);
  ASSIGN_OR_RETURN(std::unique_ptr<cluster::GlooGroup> gloo,
                   cluster::GlooGroup::Create(&node, "positions/" + group, rank, nranks,
                                              address, timeout));
  return std::unique_ptr<DataPositionsAcrossNodes>(
      new DataPositionsAcrossNodes(group, writers, std::move(gloo)));
}

Result<TargetPositions> DataPositionsAcrossNodes::Exchange(const TargetPositions& mine) {
  const size_t words = static_cast<size_t>(writers_) * kWords;
  std::vector<int64_t> in(words, 0);
  for (const auto& [writer, pos] : mine) {
    if (writer < 0 || writer >= writers_)
      return InternalError("data positions of group {}: writer {} outside 0..{}", group_, writer,
                           writers_ - 1);
    in[writer * kWords] = 1;
    in[writer * kWords + 1] = pos.epoch;
    in[writer * kWords + 2] = pos.next_batch;
  }
  std::vector<int64_t> all(words * gloo_->size());
  Status st = gloo_->AllGather(in.data(), words * sizeof(int64_t), all.data());
  if (!st.ok())
    return UnavailableError("data positions of drafter group {} across nodes: {}", group_,
                            st.message());
  TargetPositions out;
  for (int r = 0; r < gloo_->size(); ++r) {
    const int64_t* theirs = all.data() + r * words;
    for (int w = 0; w < writers_; ++w) {
      if (theirs[w * kWords] == 0) continue;
      const data::DataPosition pos{theirs[w * kWords + 1], theirs[w * kWords + 2]};
      auto [it, fresh] = out.emplace(w, pos);
      if (!fresh && Before(it->second, pos)) it->second = pos;
    }
  }
  return out;
}

}  // namespace tandem::dflash
