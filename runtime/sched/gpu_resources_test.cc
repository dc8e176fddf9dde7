// Resource discovery on a machine with CUDA devices (label gpu).
#include <cuda_runtime_api.h>

#include <cstdlib>

#include <gtest/gtest.h>

#include "runtime/sched/placement.h"
#include "runtime/sched/resources.h"

namespace tandem::sched {
namespace {

TEST(GpuResourcesTest, DiscoversEveryVisibleDevice) {
  unsetenv("TANDEM_FAKE_GPUS");
  int count = 0;
  ASSERT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  Result<NodeResources> r = DiscoverResources();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(static_cast<int>(r->gpus.size()), count);
  for (const GpuInfo& g : r->gpus) {
    EXPECT_FALSE(g.fake);
    EXPECT_FALSE(g.name.empty());
    EXPECT_GT(g.memory_bytes, 1ull << 30);
  }
  // A job asking one more GPU than the node has is refused with the node's count.
  Result<Placement> p = Place(*r, {GroupRequest{"target", count + 1, 1, 0, 0}});
  EXPECT_EQ(p.status().message(),
            fmt::format("job asks {} GPUs (target: {}×1), this node has {}", count + 1,
                        count + 1, count));
}

}  // namespace
}  // namespace tandem::sched
