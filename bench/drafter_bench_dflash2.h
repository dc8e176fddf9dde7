// What `tandem-bench drafter --type=dflash2` adds to the DFlash drafter bench: the DFlash2
// drafter of the same shape (docs/dflash2.md), its extra GEMM work for the GEMM floor, and
// its selector's numbers after the timed steps.
//
// The DFlash2 settings are those of the public DFlash2 drafters: 2 taps of the grouped
// dynamic convolution with groups of 16 channels, selector rank 256 over the top 16
// candidates, no output multiplier or soft cap, and every layer bidirectional inside the
// block (is_causal false). bench/drafter_peer.py --type dflash2 trains the same model.
//
// Thread-safety: pure functions, except PrintSelector (reads the drafter's device results).
#pragma once

#ifdef TANDEM_HAVE_CUDA
#include <cstdint>

#include "models/dflash/dflash_config.h"
#include "models/dflash/dflash_drafter.h"
#include "runtime/core/status.h"

namespace tandem::bench {

// `c` made a DFlash2 drafter (architectures, extension, is_causal false).
void MakeDFlash2Config(models::DFlashConfig* c);

// GEMM FLOPs a DFlash2 step adds to DFlash's over `rows` draft rows and `loss_rows` LM-head
// rows: per layer the two convolutions' kernel projections (forward, input grad, weight
// grad) and the selector's hidden projection (the same three). 0 for a DFlash config.
double DFlash2ExtraGemmFlops(const models::DFlashConfig& c, int64_t rows, int64_t loss_rows);

// Prints the last step's selector loss, candidate recall and selector accuracy (a host sync).
Status PrintSelector(const models::DFlashDrafter& d);

}  // namespace tandem::bench
#endif
