#include "runtime/store/object_store.h"

#include <algorithm>
#include <map>

#include "runtime/core/logging.h"

namespace tandem {

using store_internal::ObjectEntry;
using store_internal::RefPart;

namespace store_internal {
void Reclaim(ObjectEntry* entry) { entry->store->Reclaim(entry); }
}  // namespace store_internal

Result<std::unique_ptr<ObjectStore>> ObjectStore::Open(const StoreOptions& options) {
  if (options.alignment < 16 || (options.alignment & (options.alignment - 1)) != 0) {
    return InvalidArgumentError("store '{}': alignment {} must be a power of two >= 16",
                                options.name, options.alignment);
  }
  if (options.capacity_bytes < options.alignment) {
    return InvalidArgumentError("store '{}': capacity {} is below one aligned block ({})",
                                options.name, options.capacity_bytes, options.alignment);
  }
  ASSIGN_OR_RETURN(std::unique_ptr<PinnedArena> arena,
                   PinnedArena::Create(options.capacity_bytes, options.backing));
  TLOG_DEBUG("store '{}': {} {} arena", options.name, FormatBytes(arena->size()),
             ArenaKindName(arena->kind()));
  return std::unique_ptr<ObjectStore>(new ObjectStore(options, std::move(arena)));
}

ObjectStore::ObjectStore(const StoreOptions& options, std::unique_ptr<PinnedArena> arena)
    : options_(options),
      capacity_(options.capacity_bytes / options.alignment * options.alignment),
      arena_(std::move(arena)) {
  allocator_ = NewSegregatedFitAllocator(capacity_, options_.alignment);
  if (options_.reaper_interval > Duration::zero()) reaper_ = std::thread([this] { ReaperLoop(); });
}

ObjectStore::~ObjectStore() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  reaper_cv_.notify_all();
  if (reaper_.joinable()) reaper_.join();
  // Shutdown may block: copies still in flight must finish before the arena goes away.
  std::vector<std::shared_ptr<const CopyFence>> fences;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const PendingCopy& p : pending_) fences.push_back(p.fence);
  }
  for (const auto& f : fences) {
    Status s = f->Wait(std::chrono::seconds(10));
    TANDEM_CHECK_MSG(s.ok(), "store '{}' destroyed while a copy is stuck in flight: {}",
                     options_.name, s.ToString());
  }
  std::lock_guard<std::mutex> lock(mu_);
  PollFencesLocked();
  TANDEM_CHECK_MSG(live_.empty(), "store '{}' destroyed with {} objects alive: {}",
                   options_.name, live_.size(), StatsLocked().HoldersSummary());
}

Result<MutableObject> ObjectStore::Create(uint64_t bytes, std::string_view owner,
                                          Duration timeout) {
  if (bytes > capacity_) {
    return OutOfMemoryError(
        "object of {} for '{}' is larger than the whole store '{}' ({}); raise the store "
        "capacity or split the object",
        FormatBytes(bytes), owner, options_.name, FormatBytes(capacity_));
  }
  std::unique_lock<std::mutex> lock(mu_);
  std::optional<Allocation> alloc = allocator_->Allocate(bytes);
  if (!alloc && PollFencesLocked() > 0) alloc = allocator_->Allocate(bytes);
  if (!alloc) {
    ++create_waits_;
    const TimePoint start = SteadyClock::now();
    const TimePoint deadline = start + timeout;
    const Duration poll = options_.reaper_interval > Duration::zero()
                              ? options_.reaper_interval
                              : Duration(std::chrono::milliseconds(1));
    while (!alloc) {
      const TimePoint now = SteadyClock::now();
      if (now >= deadline) {
        ++create_timeouts_;
        return FullError(bytes, owner, now - start);
      }
      ++waiters_;
      space_cv_.wait_until(lock, std::min(deadline, now + poll));
      --waiters_;
      PollFencesLocked();
      alloc = allocator_->Allocate(bytes);
    }
  }
  ObjectEntry* e;
  if (!spare_entries_.empty()) {
    e = spare_entries_.back();
    spare_entries_.pop_back();
  } else {
    e = &entries_.emplace_back();
  }
  e->store = this;
  e->data = arena_->base() + alloc->offset;
  e->size = bytes;
  e->alloc = *alloc;
  e->id = ObjectId{options_.node_id, options_.store_id, next_object_id_++};
  e->owner_index = OwnerIndexLocked(owner);
  e->owner = &owners_[e->owner_index].name;
  e->live_index = static_cast<uint32_t>(live_.size());
  e->sealed.store(false, std::memory_order_relaxed);
  e->counts.store(store_internal::Unit(RefPart::kLocal), std::memory_order_relaxed);
  live_.push_back(e);
  Owner& o = owners_[e->owner_index];
  ++o.objects;
  o.bytes += alloc->size;
  ++creates_;
  used_bytes_ += alloc->size;
  high_water_ = std::max(high_water_, used_bytes_);
  return MutableObject(e);
}

uint32_t ObjectStore::OwnerIndexLocked(std::string_view owner) {
  auto it = owner_index_.find(owner);
  if (it != owner_index_.end()) return it->second;
  uint32_t index = static_cast<uint32_t>(owners_.size());
  owners_.push_back(Owner{std::string(owner)});
  owner_index_.emplace(owners_.back().name, index);
  return index;
}

void ObjectStore::Reclaim(ObjectEntry* entry) {
  std::lock_guard<std::mutex> lock(mu_);
  FreeLocked(entry);
}

void ObjectStore::FreeLocked(ObjectEntry* e) {
  TANDEM_CHECK_MSG(e->counts.load(std::memory_order_acquire) == 0,
                   "object {} freed while referenced", e->id.ToString());
  allocator_->Free(e->alloc);
  used_bytes_ -= e->alloc.size;
  Owner& o = owners_[e->owner_index];
  --o.objects;
  o.bytes -= e->alloc.size;
  ObjectEntry* last = live_.back();
  live_[e->live_index] = last;
  last->live_index = e->live_index;
  live_.pop_back();
  ++frees_;
  e->data = nullptr;
  spare_entries_.push_back(e);
  if (waiters_ > 0) space_cv_.notify_all();
}

Result<std::shared_ptr<const CopyFence>> ObjectStore::CopyOut(const ObjectRef& src,
                                                              uint64_t offset, void* dst,
                                                              uint64_t bytes,
                                                              CopyEngine& engine) {
  if (!src) return InvalidArgumentError("CopyOut from an empty ObjectRef");
  ObjectEntry* e = src.entry_;
  if (e->store != this) {
    return InvalidArgumentError("CopyOut of object {} on store '{}', which does not hold it",
                                e->id.ToString(), options_.name);
  }
  if (offset > e->size || bytes > e->size - offset) {
    return InvalidArgumentError("CopyOut of [{}, {}) from object {} of {} bytes", offset,
                                offset + bytes, e->id.ToString(), e->size);
  }
  e->AddRef(RefPart::kInflight);
  return Track(e, engine.Enqueue(dst, e->data + offset, bytes));
}

Result<std::shared_ptr<const CopyFence>> ObjectStore::CopyInto(MutableObject& dst,
                                                               uint64_t offset,
                                                               const void* src, uint64_t bytes,
                                                               CopyEngine& engine) {
  if (!dst) return InvalidArgumentError("CopyInto an empty MutableObject");
  ObjectEntry* e = dst.entry_;
  if (e->store != this) {
    return InvalidArgumentError("CopyInto object {} on store '{}', which does not hold it",
                                e->id.ToString(), options_.name);
  }
  if (offset > e->size || bytes > e->size - offset) {
    return InvalidArgumentError("CopyInto [{}, {}) of object {} of {} bytes", offset,
                                offset + bytes, e->id.ToString(), e->size);
  }
  e->AddRef(RefPart::kInflight);
  ASSIGN_OR_RETURN(std::shared_ptr<const CopyFence> fence,
                   Track(e, engine.Enqueue(e->data + offset, src, bytes)));
  dst.writes_.push_back(fence);
  return fence;
}

Result<std::shared_ptr<const CopyFence>> ObjectStore::Track(
    ObjectEntry* e, Result<std::unique_ptr<CopyFence>> fence) {
  if (!fence.ok()) {
    // The engine queued nothing, so nothing can touch the bytes: drop the in-flight ref now.
    store_internal::ReleaseRef(e, RefPart::kInflight);
    return fence.status();
  }
  std::shared_ptr<const CopyFence> shared(std::move(fence).value());
  bool wake_reaper;
  {
    std::lock_guard<std::mutex> lock(mu_);
    wake_reaper = pending_.empty();
    pending_.push_back(PendingCopy{e, shared});
  }
  if (wake_reaper) reaper_cv_.notify_one();
  return shared;
}

size_t ObjectStore::PollFences() {
  std::lock_guard<std::mutex> lock(mu_);
  return PollFencesLocked();
}

size_t ObjectStore::PollFencesLocked() {
  size_t done = 0;
  for (size_t i = 0; i < pending_.size();) {
    if (!pending_[i].fence->IsComplete()) {
      ++i;
      continue;
    }
    ObjectEntry* e = pending_[i].entry;
    pending_[i] = std::move(pending_.back());
    pending_.pop_back();
    ++done;
    if (e->DropRef(RefPart::kInflight)) FreeLocked(e);
  }
  return done;
}

void ObjectStore::ReaperLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (pending_.empty()) {
      reaper_cv_.wait(lock, [this]() REQUIRES(mu_) { return stopping_ || !pending_.empty(); });
    } else {
      reaper_cv_.wait_for(lock, options_.reaper_interval,
                          [this]() REQUIRES(mu_) { return stopping_; });
    }
    if (!stopping_) {
      PollFencesLocked();
      ++reaper_polls_;
    }
  }
}

StoreStats ObjectStore::Stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return StatsLocked();
}

StoreStats ObjectStore::StatsLocked() const {
  StoreStats s;
  s.name = options_.name;
  s.node_id = options_.node_id;
  s.store_id = options_.store_id;
  s.arena_kind = arena_->kind();
  s.allocator = allocator_->Stats();
  s.capacity = s.allocator.capacity;
  s.bytes_used = s.allocator.used_bytes;
  s.high_water = high_water_;
  s.live_objects = live_.size();
  s.inflight_copies = pending_.size();
  s.creates = creates_;
  s.frees = frees_;
  s.create_waits = create_waits_;
  s.create_timeouts = create_timeouts_;
  s.reaper_polls = reaper_polls_;
  std::map<uint32_t, OwnerStats> by_owner;
  auto add = [](HolderStats& h, uint32_t refs, uint64_t bytes) {
    if (refs == 0) return;
    h.refs += refs;
    ++h.objects;
    h.bytes += bytes;
  };
  for (const ObjectEntry* e : live_) {
    RefCounts c = e->Counts();
    add(s.local, c.local, e->alloc.size);
    add(s.channel, c.channel, e->alloc.size);
    add(s.inflight, c.inflight_copies, e->alloc.size);
    OwnerStats& o = by_owner[e->owner_index];
    o.owner = owners_[e->owner_index].name;
    ++o.objects;
    o.bytes += e->alloc.size;
    o.unsealed += e->sealed.load(std::memory_order_relaxed) ? 0 : 1;
    o.local_refs += c.local;
    o.channel_refs += c.channel;
    o.inflight_copies += c.inflight_copies;
  }
  for (auto& [index, o] : by_owner) s.owners.push_back(std::move(o));
  std::sort(s.owners.begin(), s.owners.end(),
            [](const OwnerStats& a, const OwnerStats& b) { return a.bytes > b.bytes; });
  return s;
}

Status ObjectStore::FullError(uint64_t bytes, std::string_view owner, Duration waited) const {
  StoreStats s = StatsLocked();
  return OutOfMemoryError(
      "store '{}' ({} arena) has no room for {} for '{}' after waiting {} ms: {} of {} used "
      "by {} objects, largest free block {}, {} copies in flight. Holders: {}. Release refs "
      "(e.g. drain channels) or raise the store capacity",
      options_.name, ArenaKindName(s.arena_kind), FormatBytes(bytes), owner,
      std::chrono::duration_cast<std::chrono::milliseconds>(waited).count(),
      FormatBytes(s.bytes_used), FormatBytes(s.capacity), s.live_objects,
      FormatBytes(s.allocator.largest_free_block), s.inflight_copies, s.HoldersSummary());
}

Status ObjectStore::CheckConsistency() const {
  std::lock_guard<std::mutex> lock(mu_);
  RETURN_IF_ERROR(allocator_->CheckConsistency());
  uint64_t bytes = 0;
  for (size_t i = 0; i < live_.size(); ++i) {
    const ObjectEntry* e = live_[i];
    if (e->live_index != i) return InternalError("live table index of {} is stale", e->id.ToString());
    if (e->counts.load(std::memory_order_acquire) == 0)
      return InternalError("object {} is live with no references", e->id.ToString());
    bytes += e->alloc.size;
  }
  uint64_t used = allocator_->Stats().used_bytes;
  if (bytes != used) return InternalError("live objects hold {} bytes, allocator {}", bytes, used);
  return Status::Ok();
}

}  // namespace tandem
