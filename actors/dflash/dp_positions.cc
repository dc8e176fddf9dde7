#include "actors/dflash/dp_positions.h"

namespace tandem::dflash {
namespace {

struct Boards {
  std::mutex mu;
  std::map<std::string, std::unique_ptr<DataParallelPositions>> by_group;
};

}  // namespace

DataParallelPositions& DataParallelPositions::ForGroup(JobRegistry& registry,
                                                       const std::string& group) {
  Boards& boards = registry.Get<Boards>();
  std::lock_guard<std::mutex> lock(boards.mu);
  std::unique_ptr<DataParallelPositions>& b = boards.by_group[group];
  if (b == nullptr) b = std::make_unique<DataParallelPositions>();
  return *b;
}

void DataParallelPositions::Publish(int rank, int64_t step, const TargetPositions& positions) {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<int64_t, TargetPositions>& mine = by_rank_[rank];
  mine[step] = positions;
  // Replicas are at most one step apart (the all-reduce is a barrier), so older entries are
  // never asked for again.
  mine.erase(mine.begin(), mine.lower_bound(step - 2));
}

Result<TargetPositions> DataParallelPositions::Merged(int64_t step,
                                                     const std::vector<int>& ranks) const {
  std::lock_guard<std::mutex> lock(mu_);
  TargetPositions out;
  for (int rank : ranks) {
    const TargetPositions* published = nullptr;
    if (auto r = by_rank_.find(rank); r != by_rank_.end())
      if (auto s = r->second.find(step); s != r->second.end()) published = &s->second;
    if (published == nullptr)
      return InternalError("drafter replica {} has not published its data positions of step {}",
                           rank, step);
    for (const auto& [target, pos] : *published) {
      auto [it, fresh] = out.emplace(target, pos);
      if (!fresh && Before(it->second, pos)) it->second = pos;
    }
  }
  return out;
}

}  // namespace tandem::dflash
