#include "kernels/testing/gpu.h"

namespace tandem::kernels::testing {

CachingPool& Pool() {
  Result<CachingPool*> p = CudaPool(0);
  TANDEM_CHECK_OK(p.status());
  return **p;
}

}  // namespace tandem::kernels::testing
