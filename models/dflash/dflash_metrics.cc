#include "models/dflash/dflash_metrics.h"

#include <vector>

#include "runtime/core/status.h"

namespace tandem::models {

BlockAcceptance BlockAcceptanceStats(const uint8_t* correct, int64_t rows, int64_t block_size) {
  TANDEM_CHECK_MSG(block_size >= 2 && rows % block_size == 0,
                   "BlockAcceptanceStats: {} rows are not whole blocks of {}", rows, block_size);
  BlockAcceptance out;
  const int64_t nb = rows / block_size;
  if (nb == 0) return out;
  std::vector<int> alive(nb, 1);  // block's slots 1..j all correct so far
  for (int64_t j = 1; j < block_size; ++j) {
    int64_t ok = 0, hit = 0;
    for (int64_t blk = 0; blk < nb; ++blk) {
      const int c = correct[blk * block_size + j] != 0;
      alive[blk] &= c;
      ok += alive[blk];
      hit += c;
    }
    out.tau += static_cast<double>(ok) / nb;
    out.accuracy += static_cast<double>(hit) / nb / (block_size - 1);
  }
  return out;
}

}  // namespace tandem::models
