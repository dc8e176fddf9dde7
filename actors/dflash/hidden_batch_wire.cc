// The dflash.target class's job-prepare hook: its `out` channel carries HiddenBatches, which
// cross nodes with WireCodec<HiddenBatch> (hidden_batch_wire.h).
#include "actors/dflash/hidden_batch_wire.h"

#include "runtime/job/job_prepare.h"
#include "runtime/transfer/wire_port.h"

namespace tandem::dflash {
namespace {

Status RegisterHiddenWire(const JobSpec&, const ActorGroupSpec& target, JobRegistry& registry) {
  ASSIGN_OR_RETURN(std::string out, target.settings.GetString("out", ""));
  if (!out.empty()) registry.Get<transfer::WireChannels>().Register<HiddenBatch>(out);
  return Status::Ok();
}

}  // namespace

TANDEM_REGISTER_JOB_PREPARE("dflash.target", RegisterHiddenWire);

}  // namespace tandem::dflash
