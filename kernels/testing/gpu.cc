#include "kernels/testing/gpu.h"

#include "kernels/core/device_pools.h"

namespace tandem::kernels::testing {

CachingPool& Pool() {
  // The test binary's own pools (never destroyed: tests may hold tensors until exit).
  static DevicePools* pools = new DevicePools();
  Result<CachingPool*> p = pools->Pool(0);
  TANDEM_CHECK_OK(p.status());
  return **p;
}

}  // namespace tandem::kernels::testing
