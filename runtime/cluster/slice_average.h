// The arithmetic of the drafter's data-parallel gradient average, in one place, so that
// every path (threads of one process, processes over Gloo) produces bit-identical results.
//
// The n elements are cut into `nranks` contiguous slices of ceil(n / nranks) elements (the
// last ones shorter or empty); each rank averages its own slice over all ranks' copies,
// summing in rank order 0, 1, ... in fp32 and multiplying by the fp32 reciprocal of nranks.
// Whoever computes a slice, from whatever buffers, gets the same bits.
//
// Header-only (no library to link). Thread-safety: pure functions.
#pragma once

#include <algorithm>
#include <cstdint>

namespace tandem::cluster {

struct SliceRange {
  int64_t lo = 0, hi = 0;  // elements [lo, hi)
  int64_t size() const { return hi - lo; }
};

// Rank `rank`'s slice of n elements over `nranks` ranks. REQUIRES: 0 <= rank < nranks.
inline SliceRange RankSlice(int64_t n, int nranks, int rank) {
  const int64_t per = (n + nranks - 1) / nranks;
  const int64_t lo = std::min(n, rank * per);
  return {lo, std::min(n, lo + per)};
}

// out[i] = (inputs[0][offset + i] + ... + inputs[nranks-1][offset + i]) * (1.0f / nranks)
// for i in [0, count), summed left to right in fp32. `inputs[r]` is rank r's buffer (the
// whole gradient, with `offset` the slice's start, or just its copy of the slice, with
// offset 0). `out` may alias one of the inputs' elements read at the same index.
inline void AverageInRankOrder(const float* const* inputs, int nranks, int64_t offset,
                               int64_t count, float* out) {
  const float inv = 1.0f / static_cast<float>(nranks);
  for (int64_t i = 0; i < count; ++i) {
    float sum = 0.f;
    for (int r = 0; r < nranks; ++r) sum += inputs[r][offset + i];
    out[i] = sum * inv;
  }
}

}  // namespace tandem::cluster
