#include "runtime/control/log_ring.h"

namespace tandem {

bool LogActorMatches(const std::string& want, const std::string& actor) {
  if (want.empty() || want == actor) return true;
  return actor.size() > want.size() && actor.compare(0, want.size(), want) == 0 &&
         actor[want.size()] == '/';
}

void LogRing::Append(std::string actor, std::string text) {
  std::lock_guard<std::mutex> lock(mu_);
  lines_.push_back({next_seq_++, std::move(actor), std::move(text)});
  while (lines_.size() > capacity_) lines_.pop_front();
}

std::vector<LogLine> LogRing::Query(const std::string& actor, uint64_t after, size_t max_lines,
                                    uint64_t* last) const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<LogLine> out;
  *last = after;
  for (const LogLine& l : lines_) {
    if (l.seq <= after) continue;
    if (out.size() >= max_lines) break;
    *last = l.seq;  // skipped lines of other actors advance the cursor too
    if (LogActorMatches(actor, l.actor)) out.push_back(l);
  }
  return out;
}

}  // namespace tandem
