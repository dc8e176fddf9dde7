// Two-level segregated fit over granules of `alignment` bytes.
//
// A size of u granules maps to first level fl and second level sl: sizes below 16 granules
// get one bin each (fl 0, sl = u); larger sizes split each power of two [2^m, 2^(m+1)) into
// 16 equal bins (fl = m - 3). Insert uses the bin that holds u (round down); search rounds u
// up to the next bin boundary so any block in the bin found fits, then falls back to a scan of
// u's own bin, so a request that fits in the largest free block is never refused.
#include "runtime/store/allocator.h"

#include <bit>
#include <vector>

namespace tandem {
namespace {

constexpr uint32_t kNone = UINT32_MAX;
constexpr int kSlBits = 4;
constexpr int kSlCount = 1 << kSlBits;
constexpr int kFlCount = 64;

struct Bin {
  int fl;
  int sl;
};

Bin MapDown(uint64_t u) {
  if (u < kSlCount) return {0, static_cast<int>(u)};
  int msb = 63 - std::countl_zero(u);
  return {msb - (kSlBits - 1), static_cast<int>((u >> (msb - kSlBits)) & (kSlCount - 1))};
}

Bin MapUp(uint64_t u) {
  if (u >= kSlCount) {
    int msb = 63 - std::countl_zero(u);
    u += (uint64_t{1} << (msb - kSlBits)) - 1;
  }
  return MapDown(u);
}

class SegregatedFitAllocator final : public ArenaAllocator {
 public:
  SegregatedFitAllocator(uint64_t capacity, uint64_t alignment)
      : alignment_(alignment), capacity_(capacity / alignment * alignment) {
    TANDEM_CHECK_MSG(std::has_single_bit(alignment) && alignment >= 16,
                     "alignment {} must be a power of two >= 16", alignment);
    for (auto& row : heads_)
      for (auto& h : row) h = kNone;
    if (capacity_ > 0) {
      uint32_t b = NewBlock(0, capacity_);
      InsertFree(b);
    }
  }

  std::optional<Allocation> Allocate(uint64_t bytes) override {
    uint64_t size = RoundUp(bytes == 0 ? 1 : bytes);
    if (size > capacity_ || size < bytes) return std::nullopt;
    uint32_t b = FindFree(size);
    if (b == kNone) return std::nullopt;
    RemoveFree(b);
    if (blocks_[b].size - size >= alignment_) {
      uint32_t rest = NewBlock(blocks_[b].offset + size, blocks_[b].size - size);
      Block& blk = blocks_[b];
      blk.size = size;
      blocks_[rest].prev_phys = b;
      blocks_[rest].next_phys = blk.next_phys;
      if (blk.next_phys != kNone) blocks_[blk.next_phys].prev_phys = rest;
      blk.next_phys = rest;
      InsertFree(rest);
    }
    Block& blk = blocks_[b];
    blk.used = true;
    used_ += blk.size;
    ++live_;
    return Allocation{blk.offset, blk.size, b};
  }

  void Free(const Allocation& a) override {
    TANDEM_CHECK_MSG(a.handle < blocks_.size() && blocks_[a.handle].used &&
                         blocks_[a.handle].offset == a.offset && blocks_[a.handle].size == a.size,
                     "Free of unknown or already freed range at offset {}", a.offset);
    uint32_t b = a.handle;
    used_ -= a.size;
    --live_;
    blocks_[b].used = false;
    uint32_t next = blocks_[b].next_phys;
    if (next != kNone && !blocks_[next].used) {
      RemoveFree(next);
      Absorb(b, next);
    }
    uint32_t prev = blocks_[b].prev_phys;
    if (prev != kNone && !blocks_[prev].used) {
      RemoveFree(prev);
      Absorb(prev, b);
      b = prev;
    }
    InsertFree(b);
  }

  AllocatorStats Stats() const override {
    AllocatorStats s;
    s.capacity = capacity_;
    s.used_bytes = used_;
    s.free_bytes = capacity_ - used_;
    s.live_allocations = live_;
    s.free_blocks = free_blocks_;
    if (fl_bitmap_ != 0) {
      int fl = 63 - std::countl_zero(fl_bitmap_);
      int sl = 31 - std::countl_zero(sl_bitmap_[fl]);
      for (uint32_t b = heads_[fl][sl]; b != kNone; b = blocks_[b].next_free)
        s.largest_free_block = std::max(s.largest_free_block, blocks_[b].size);
    }
    return s;
  }

  Status CheckConsistency() const override {
    uint64_t expect_offset = 0, used = 0, free_count = 0;
    bool prev_free = false;
    uint32_t first = kNone;
    for (uint32_t i = 0; i < blocks_.size(); ++i)
      if (blocks_[i].live && blocks_[i].prev_phys == kNone) first = i;
    for (uint32_t b = first; b != kNone; b = blocks_[b].next_phys) {
      const Block& blk = blocks_[b];
      if (blk.offset != expect_offset)
        return InternalError("block at {} expected at offset {}", blk.offset, expect_offset);
      if (blk.size == 0 || blk.size % alignment_ != 0)
        return InternalError("block at {} has size {}", blk.offset, blk.size);
      if (!blk.used && prev_free)
        return InternalError("free blocks at {} and before it were not coalesced", blk.offset);
      if (!blk.used) {
        Bin bin = MapDown(blk.size / alignment_);
        bool found = false;
        for (uint32_t f = heads_[bin.fl][bin.sl]; f != kNone; f = blocks_[f].next_free)
          found |= (f == b);
        if (!found) return InternalError("free block at {} is not in its bin", blk.offset);
        ++free_count;
      }
      used += blk.used ? blk.size : 0;
      prev_free = !blk.used;
      expect_offset += blk.size;
    }
    if (expect_offset != capacity_)
      return InternalError("blocks cover {} bytes of {}", expect_offset, capacity_);
    if (used != used_) return InternalError("used bytes {} but counter says {}", used, used_);
    if (free_count != free_blocks_)
      return InternalError("{} free blocks but counter says {}", free_count, free_blocks_);
    return Status::Ok();
  }

  uint64_t capacity() const override { return capacity_; }
  uint64_t alignment() const override { return alignment_; }

 private:
  struct Block {
    uint64_t offset = 0;
    uint64_t size = 0;
    uint32_t prev_phys = kNone, next_phys = kNone;  // address-order neighbours
    uint32_t prev_free = kNone, next_free = kNone;  // bin list, when free
    bool used = false;
    bool live = false;  // false while the id sits in spare_ids_
  };

  uint64_t RoundUp(uint64_t bytes) const { return (bytes + alignment_ - 1) & ~(alignment_ - 1); }

  uint32_t NewBlock(uint64_t offset, uint64_t size) {
    uint32_t id;
    if (!spare_ids_.empty()) {
      id = spare_ids_.back();
      spare_ids_.pop_back();
    } else {
      id = static_cast<uint32_t>(blocks_.size());
      blocks_.emplace_back();
    }
    blocks_[id] = Block{offset, size, kNone, kNone, kNone, kNone, false, true};
    return id;
  }

  // `into` grows over its next neighbour `gone`, whose id is recycled.
  void Absorb(uint32_t into, uint32_t gone) {
    Block& g = blocks_[gone];
    blocks_[into].size += g.size;
    blocks_[into].next_phys = g.next_phys;
    if (g.next_phys != kNone) blocks_[g.next_phys].prev_phys = into;
    g.live = false;
    spare_ids_.push_back(gone);
  }

  void InsertFree(uint32_t b) {
    Bin bin = MapDown(blocks_[b].size / alignment_);
    uint32_t& head = heads_[bin.fl][bin.sl];
    blocks_[b].prev_free = kNone;
    blocks_[b].next_free = head;
    if (head != kNone) blocks_[head].prev_free = b;
    head = b;
    fl_bitmap_ |= uint64_t{1} << bin.fl;
    sl_bitmap_[bin.fl] |= 1u << bin.sl;
    ++free_blocks_;
  }

  void RemoveFree(uint32_t b) {
    Block& blk = blocks_[b];
    Bin bin = MapDown(blk.size / alignment_);
    if (blk.prev_free != kNone) blocks_[blk.prev_free].next_free = blk.next_free;
    else heads_[bin.fl][bin.sl] = blk.next_free;
    if (blk.next_free != kNone) blocks_[blk.next_free].prev_free = blk.prev_free;
    if (heads_[bin.fl][bin.sl] == kNone) {
      sl_bitmap_[bin.fl] &= ~(1u << bin.sl);
      if (sl_bitmap_[bin.fl] == 0) fl_bitmap_ &= ~(uint64_t{1} << bin.fl);
    }
    --free_blocks_;
  }

  uint32_t FindFree(uint64_t size) const {
    uint64_t u = size / alignment_;
    Bin bin = MapUp(u);
    if (bin.fl < kFlCount) {
      uint32_t sl_map = sl_bitmap_[bin.fl] & (~0u << bin.sl);
      if (sl_map != 0) return heads_[bin.fl][std::countr_zero(sl_map)];
      uint64_t fl_map = bin.fl + 1 < kFlCount ? fl_bitmap_ & (~uint64_t{0} << (bin.fl + 1)) : 0;
      if (fl_map != 0) {
        int fl = std::countr_zero(fl_map);
        return heads_[fl][std::countr_zero(sl_bitmap_[fl])];
      }
    }
    Bin own = MapDown(u);
    for (uint32_t b = heads_[own.fl][own.sl]; b != kNone; b = blocks_[b].next_free)
      if (blocks_[b].size >= size) return b;
    return kNone;
  }

  const uint64_t alignment_;
  const uint64_t capacity_;
  std::vector<Block> blocks_;
  std::vector<uint32_t> spare_ids_;
  uint32_t heads_[kFlCount][kSlCount];
  uint64_t fl_bitmap_ = 0;
  uint32_t sl_bitmap_[kFlCount] = {};
  uint64_t used_ = 0;
  uint64_t live_ = 0;
  uint64_t free_blocks_ = 0;
};

}  // namespace

std::unique_ptr<ArenaAllocator> NewSegregatedFitAllocator(uint64_t capacity, uint64_t alignment) {
  return std::make_unique<SegregatedFitAllocator>(capacity, alignment);
}

}  // namespace tandem
