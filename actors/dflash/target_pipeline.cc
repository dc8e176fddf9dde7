#include "actors/dflash/target_pipeline.h"

#include <fmt/format.h>

#include "actors/dflash/target_pipeline_internal.h"
#include "kernels/core/dtype.h"
#include "runtime/profile/profile_stats.h"

namespace tandem::dflash {
namespace internal {

HiddenBatch MakeShell(data::TokenBatch batch, data::DataPosition next, int replica, int writer,
                      const TargetModelSpec& spec) {
  HiddenBatch hb;
  hb.checksum = batch.Checksum();
  hb.tokens = std::move(batch);
  hb.source_replica = replica;
  hb.writer = writer;
  hb.hidden_size = spec.config.hidden_size;
  hb.layer_ids = spec.layer_ids;
  hb.next_position = next;
  return hb;
}

}  // namespace internal

namespace {

class CpuPipeline final : public TargetPipeline {
 public:
  CpuPipeline(SharedTarget* t, const TargetModelSpec& spec, JobEnv* env,
              Channel<HiddenBatch>* out, int producer, std::string owner)
      : target_(t), spec_(spec), env_(env), out_(out), producer_(producer),
        owner_(std::move(owner)),
        forward_(env->profile->Stage("target.forward")),
        push_wait_(env->profile->Stage("target.push_wait")) {}

  Status Submit(data::TokenBatch batch, data::DataPosition next, int replica) override {
    HiddenBatch hb = internal::MakeShell(std::move(batch), next, replica, producer_, spec_);
    const int64_t t = hb.tokens.tokens(), h = hb.hidden_size;
    const uint64_t bytes = static_cast<uint64_t>(t * h) * sizeof(kernels::bf16);
    std::vector<MutableObject> objs;
    std::vector<models::LayerCapture> caps;
    {
      ScopedTimer timer(forward_);
      for (int64_t id : spec_.layer_ids) {
        ASSIGN_OR_RETURN(MutableObject obj, env_->store->Create(bytes, owner_));
        caps.push_back({static_cast<int>(id),
                        kernels::TensorView(obj.data(), kernels::DType::kBF16, {t, h})});
        objs.push_back(std::move(obj));
      }
      auto& b = hb.tokens;
      models::PackedBatch pb{
          kernels::TensorView(b.input_ids.data(), kernels::DType::kI32, {t}),
          kernels::TensorView(b.position_ids.data(), kernels::DType::kI32, {t}),
          kernels::TensorView(b.cu_seqlens.data(), kernels::DType::kI32, {b.documents() + 1}),
          b.max_seqlen};
      RETURN_IF_ERROR(target_->Forward(pb, caps));
      for (MutableObject& o : objs) hb.layers.push_back(o.Seal());
    }
    ScopedTimer timer(push_wait_);
    return out_->PushFrom(producer_, std::move(hb));
  }
  Status Finish() override { return Status::Ok(); }

 private:
  SharedTarget* target_;
  TargetModelSpec spec_;
  JobEnv* env_;
  Channel<HiddenBatch>* out_;
  int producer_;
  std::string owner_;
  StageHandle forward_, push_wait_;
};

}  // namespace

Result<std::unique_ptr<TargetPipeline>> TargetPipeline::Create(SharedTarget* target,
                                                               const TargetModelSpec& spec,
                                                               JobEnv* env,
                                                               Channel<HiddenBatch>* out,
                                                               int producer,
                                                               std::string owner) {
  if (target->device().is_cpu())
    return std::unique_ptr<TargetPipeline>(
        new CpuPipeline(target, spec, env, out, producer, owner));
  return internal::MakeCudaPipeline(target, spec, env, out, producer, std::move(owner));
}

}  // namespace tandem::dflash
