// The DFlash2 part of `tandem-bench drafter`; see drafter_bench_dflash2.h.
#include "bench/drafter_bench_dflash2.h"

#ifdef TANDEM_HAVE_CUDA
#include <cstdio>

#include "kernels/core/memory.h"

namespace tandem::bench {

void MakeDFlash2Config(models::DFlashConfig* c) {
  c->layers.architectures = {"DFlash2DraftModel"};
  models::DFlash2Extension e;
  e.conv_kernel_size = 2;
  e.conv_group_size = 16;
  e.selector_rank = 256;
  e.selector_top_k = 16;
  c->dflash2 = e;
  c->is_causal = false;
}

double DFlash2ExtraGemmFlops(const models::DFlashConfig& c, int64_t rows, int64_t loss_rows) {
  if (!c.dflash2) return 0;
  const models::DFlash2Extension& e = *c.dflash2;
  const double h = static_cast<double>(c.layers.hidden_size);
  const double kernel_cols = 2.0 * e.conv_kernel_size * e.conv_groups(c.layers.hidden_size);
  const double convs = 2 * (2.0 * rows * h * kernel_cols);  // attention and MLP branch
  const double selector = 2.0 * loss_rows * h * e.selector_rank;
  return 3 * (c.layers.num_hidden_layers * convs + selector);
}

Status PrintSelector(const models::DFlashDrafter& d) {
  if (d.selector_loss().empty()) return Status::Ok();
  float loss = 0;
  int32_t stats[2] = {};
  RETURN_IF_ERROR(kernels::CopyToHost(&loss, d.selector_loss(), d.stream()));
  RETURN_IF_ERROR(kernels::CopyToHost(stats, d.selector_stats(), d.stream()));
  RETURN_IF_ERROR(kernels::SynchronizeStream(d.selector_loss().device(), d.stream()));
  const int64_t rows = d.loss_rows();
  std::printf("selector (last step): loss %.4f, candidate recall %.4f (%d of %lld loss rows), "
              "selector accuracy %.4f\n",
              loss, rows > 0 ? static_cast<double>(stats[0]) / rows : 0.0, stats[0],
              static_cast<long long>(rows),
              stats[0] > 0 ? static_cast<double>(stats[1]) / stats[0] : 0.0);
  return Status::Ok();
}

}  // namespace tandem::bench
#endif
