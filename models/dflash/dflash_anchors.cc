// Anchor sampling and block tables for DFlash training (see dflash_anchors.h).
#include "models/dflash/dflash_anchors.h"

#include <algorithm>
#include <cmath>

#include "kernels/random/philox.h"

namespace tandem::models {
namespace {

// Document index of every token, after checking the metadata's shapes.
Result<std::vector<int32_t>> DocOfToken(const PackedBatchMeta& m) {
  const int64_t t = static_cast<int64_t>(m.input_ids.size());
  if (static_cast<int64_t>(m.position_ids.size()) != t)
    return InvalidArgumentError("DFlash batch: position_ids has {} entries, input_ids {}",
                                m.position_ids.size(), t);
  if (!m.loss_mask.empty() && static_cast<int64_t>(m.loss_mask.size()) != t)
    return InvalidArgumentError("DFlash batch: loss_mask has {} entries, input_ids {}",
                                m.loss_mask.size(), t);
  if (m.cu_seqlens.size() < 2 || m.cu_seqlens.front() != 0 || m.cu_seqlens.back() != t)
    return InvalidArgumentError("DFlash batch: cu_seqlens must run from 0 to T = {}", t);
  std::vector<int32_t> doc(t);
  for (size_t d = 0; d + 1 < m.cu_seqlens.size(); ++d) {
    if (m.cu_seqlens[d + 1] < m.cu_seqlens[d])
      return InvalidArgumentError("DFlash batch: cu_seqlens decreases at entry {}", d + 1);
    for (int32_t i = m.cu_seqlens[d]; i < m.cu_seqlens[d + 1]; ++i) doc[i] = static_cast<int32_t>(d);
  }
  return doc;
}

bool Counts(const PackedBatchMeta& m, int64_t i) { return m.loss_mask.empty() || m.loss_mask[i]; }

// Uniform integer in [0, n) from the Philox stream (seed, step), draw number `*k`.
uint32_t Draw(uint64_t seed, uint64_t step, uint64_t* k, uint32_t n) {
  const uint64_t i = (*k)++;
  const uint32_t bits = kernels::PhiloxBlock(seed, step, i >> 2).v[i & 3];
  return static_cast<uint32_t>((static_cast<uint64_t>(bits) * n) >> 32);
}

// [first, last) of each document's anchors in `pool` (sorted eligible anchors).
std::vector<std::pair<size_t, size_t>> DocumentRanges(const std::vector<int32_t>& pool,
                                                      const std::vector<int32_t>& doc) {
  std::vector<std::pair<size_t, size_t>> ranges;
  for (size_t i = 0; i < pool.size();) {
    size_t j = i;
    while (j < pool.size() && doc[pool[j]] == doc[pool[i]]) ++j;
    ranges.emplace_back(i, j);
    i = j;
  }
  return ranges;
}

// Appends `k` of `items` to `out`, uniformly without replacement (a partial Fisher-Yates
// that reorders `items`). REQUIRES: k <= items.size().
template <typename T>
void TakeUniform(std::vector<T>& items, size_t k, uint64_t seed, uint64_t step, uint64_t* draw,
                 std::vector<T>* out) {
  for (size_t i = 0; i < k; ++i) {
    const size_t j = i + Draw(seed, step, draw, static_cast<uint32_t>(items.size() - i));
    std::swap(items[i], items[j]);
    out->push_back(items[i]);
  }
}

}  // namespace

float DFlashSlotWeight(int64_t j, double loss_decay) {
  return std::exp(-static_cast<float>(j - 1) / static_cast<float>(loss_decay));
}

double DFlashDefaultLossDecay(int64_t block_size) {
  return 1.0 + 3.0 * static_cast<double>(block_size) / 8.0;
}

Result<std::vector<int32_t>> EligibleAnchors(const PackedBatchMeta& meta) {
  ASSIGN_OR_RETURN(std::vector<int32_t> doc, DocOfToken(meta));
  std::vector<int32_t> out;
  for (int64_t a = 0; a + 1 < static_cast<int64_t>(doc.size()); ++a)
    if (doc[a] == doc[a + 1] && Counts(meta, a) && Counts(meta, a + 1))
      out.push_back(static_cast<int32_t>(a));
  return out;
}

Result<std::vector<int32_t>> SampleAnchors(const PackedBatchMeta& meta, int64_t count,
                                           uint64_t seed, uint64_t step) {
  ASSIGN_OR_RETURN(std::vector<int32_t> pool, EligibleAnchors(meta));
  if (count <= 0) return std::vector<int32_t>{};
  if (static_cast<int64_t>(pool.size()) <= count) return pool;
  ASSIGN_OR_RETURN(std::vector<int32_t> doc, DocOfToken(meta));
  uint64_t k = 0;
  // Pass 1: one anchor per document, documents in a random order.
  std::vector<std::pair<size_t, size_t>> ranges = DocumentRanges(pool, doc);
  for (size_t i = ranges.size(); i > 1; --i)
    std::swap(ranges[i - 1], ranges[Draw(seed, step, &k, static_cast<uint32_t>(i))]);
  std::vector<int32_t> chosen;
  std::vector<char> taken(pool.size(), 0);
  for (const auto& [lo, hi] : ranges) {
    if (static_cast<int64_t>(chosen.size()) == count) break;
    const size_t pick = lo + Draw(seed, step, &k, static_cast<uint32_t>(hi - lo));
    taken[pick] = 1;
    chosen.push_back(pool[pick]);
  }
  // Pass 2: the rest uniformly without replacement (partial Fisher-Yates over the remainder).
  std::vector<int32_t> rest;
  for (size_t i = 0; i < pool.size(); ++i)
    if (!taken[i]) rest.push_back(pool[i]);
  TakeUniform(rest, static_cast<size_t>(count) - chosen.size(), seed, step, &k, &chosen);
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

Result<std::vector<int32_t>> SampleAnchorsPerDocument(const PackedBatchMeta& meta,
                                                      int64_t per_document, int64_t count,
                                                      uint64_t seed, uint64_t step) {
  ASSIGN_OR_RETURN(std::vector<int32_t> pool, EligibleAnchors(meta));
  if (count <= 0 || per_document <= 0) return std::vector<int32_t>{};
  ASSIGN_OR_RETURN(std::vector<int32_t> doc, DocOfToken(meta));
  const std::vector<std::pair<size_t, size_t>> ranges = DocumentRanges(pool, doc);
  std::vector<int64_t> want(ranges.size()), take(ranges.size());
  int64_t total = 0;
  for (size_t d = 0; d < ranges.size(); ++d) {
    want[d] = std::min<int64_t>(per_document, ranges[d].second - ranges[d].first);
    total += want[d];
  }
  uint64_t k = 0;
  take = want;
  if (total > count) {
    // The equal share: the largest c with sum_d min(want_d, c) <= count.
    auto taken_at = [&](int64_t c) {
      int64_t n = 0;
      for (int64_t w : want) n += std::min(w, c);
      return n;
    };
    int64_t lo = 0, hi = per_document;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo + 1) / 2;
      if (taken_at(mid) <= count) lo = mid; else hi = mid - 1;
    }
    std::vector<size_t> more;  // documents that wanted more than the share
    for (size_t d = 0; d < want.size(); ++d) {
      take[d] = std::min(want[d], lo);
      if (want[d] > lo) more.push_back(d);
    }
    // Fewer than more.size() left, since the share lo + 1 would not fit.
    std::vector<size_t> extra;
    TakeUniform(more, static_cast<size_t>(count - taken_at(lo)), seed, step, &k, &extra);
    for (size_t d : extra) ++take[d];
  }
  std::vector<int32_t> chosen;
  for (size_t d = 0; d < ranges.size(); ++d) {
    std::vector<int32_t> own(pool.begin() + ranges[d].first, pool.begin() + ranges[d].second);
    TakeUniform(own, static_cast<size_t>(take[d]), seed, step, &k, &chosen);
  }
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

Result<DFlashBlockPlan> BuildBlockPlan(const PackedBatchMeta& meta,
                                       std::span<const int32_t> anchors, int64_t num_blocks,
                                       int64_t block_size, int32_t mask_token_id,
                                       double loss_decay) {
  ASSIGN_OR_RETURN(std::vector<int32_t> doc, DocOfToken(meta));
  if (static_cast<int64_t>(anchors.size()) > num_blocks)
    return InvalidArgumentError("DFlash plan: {} anchors for {} blocks", anchors.size(),
                                num_blocks);
  if (block_size < 2) return InvalidArgumentError("DFlash plan: block_size {} < 2", block_size);
  if (!(loss_decay > 0))
    return InvalidArgumentError("DFlash plan: loss_decay {} must be positive", loss_decay);
  const int64_t t = static_cast<int64_t>(doc.size());
  DFlashBlockPlan p;
  p.num_blocks = num_blocks;
  p.block_size = block_size;
  p.tokens = t;
  const int64_t rows = num_blocks * block_size;
  p.anchors.assign(num_blocks, 0);
  p.doc_start.assign(num_blocks, 0);
  p.block_ids.assign(rows, mask_token_id);
  p.block_pos.resize(rows);
  p.targets.assign(rows, -1);
  p.weights.assign(rows, 0.0f);
  p.prev_ids.assign(rows, -1);
  p.ctx_pos.assign(meta.position_ids.begin(), meta.position_ids.end());
  for (int64_t r = 0; r < rows; ++r) p.block_pos[r] = static_cast<int32_t>(r % block_size);
  for (size_t b = 0; b < anchors.size(); ++b) {
    const int32_t a = anchors[b];
    if (a < 0 || a + 1 >= t || doc[a] != doc[a + 1] || (b > 0 && anchors[b - 1] >= a))
      return InvalidArgumentError("DFlash plan: anchor {} (block {}) is not a sorted eligible "
                                  "anchor of a batch of {} tokens", a, b, t);
    const int32_t start = meta.cu_seqlens[doc[a]], end = meta.cu_seqlens[doc[a] + 1];
    p.anchors[b] = a;
    p.doc_start[b] = start;
    const int64_t base = static_cast<int64_t>(b) * block_size;
    p.block_ids[base] = meta.input_ids[a];
    for (int64_t j = 0; j < block_size; ++j) {
      p.block_pos[base + j] = static_cast<int32_t>(meta.position_ids[a] + j);
      if (j >= 1 && a + j - 1 < end) p.prev_ids[base + j] = meta.input_ids[a + j - 1];
      if (j == 0 || a + j >= end || !Counts(meta, a + j)) continue;
      p.targets[base + j] = meta.input_ids[a + j];
      p.weights[base + j] = DFlashSlotWeight(j, loss_decay);
    }
  }
  return p;
}

}  // namespace tandem::models
