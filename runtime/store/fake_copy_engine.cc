#include "runtime/store/fake_copy_engine.h"

#include <cstring>

namespace tandem {
namespace {

class FakeFence final : public CopyFence {
 public:
  explicit FakeFence(std::shared_ptr<std::atomic<bool>> done) : done_(std::move(done)) {}
  bool IsComplete() const override { return done_->load(std::memory_order_acquire); }

 private:
  std::shared_ptr<std::atomic<bool>> done_;
};

}  // namespace

Result<std::unique_ptr<CopyFence>> FakeCopyEngine::Enqueue(void* dst, const void* src,
                                                           uint64_t bytes) {
  auto done = std::make_shared<std::atomic<bool>>(false);
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(Copy{dst, src, bytes, done});
  }
  return std::unique_ptr<CopyFence>(new FakeFence(std::move(done)));
}

bool FakeCopyEngine::CompleteOldest() {
  Copy c;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (queue_.empty()) return false;
    c = std::move(queue_.front());
    queue_.pop_front();
  }
  std::memcpy(c.dst, c.src, c.bytes);
  c.done->store(true, std::memory_order_release);
  return true;
}

size_t FakeCopyEngine::CompleteAll() {
  size_t n = 0;
  while (CompleteOldest()) ++n;
  return n;
}

size_t FakeCopyEngine::pending() const {
  std::lock_guard<std::mutex> lock(mu_);
  return queue_.size();
}

}  // namespace tandem
