// `tandem-bench pipeline [seconds]` (issue 6): pipeline efficiency of the colocated DFlash
// job on one GPU. In one process: (a) the target alone: forward + 5 captures of a
// max_tokens batch, seconds per token; (b) the drafter alone: DFlashTrainer steps on random
// context, seconds per token; (c) examples/qwen3-8b-1gpu.toml through JobRunner for
// `seconds` (default 120) of steady state, tokens/s from the drafter's summary. Prints
// efficiency = tok/s / (1 / (t_target + t_drafter)), the job's profile table, and the bar.
#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>

#include <fmt/format.h>

#include "actors/dflash/target_model.h"
#include "actors/dflash/target_settings.h"
#include "bench/bench.h"
#include "models/dflash/dflash_trainer.h"
#include "runtime/job/job_spec.h"
#include "runtime/job/runner.h"

#ifdef TANDEM_HAVE_CUDA
#include <cuda_runtime.h>

#include "kernels/core/memory.h"
#include "kernels/core/stream.h"
#endif

namespace tandem {
namespace {

#ifdef TANDEM_HAVE_CUDA

constexpr double kBar = 0.9;

const ActorGroupSpec* Group(const JobSpec& job, const std::string& name) {
  for (const ActorGroupSpec& g : job.actors)
    if (g.name == name) return &g;
  return nullptr;
}

// Packed batch of `docs` equal documents filling `t` tokens (host).
struct HostBatch {
  std::vector<int32_t> ids, pos, cu;
};
HostBatch MakeBatch(int64_t t, int64_t docs, int64_t vocab) {
  HostBatch b;
  const int64_t len = t / docs;
  uint64_t x = 12345;
  for (int64_t i = 0; i < t; ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    b.ids.push_back(static_cast<int32_t>((x >> 33) % vocab));
    b.pos.push_back(static_cast<int32_t>(i % len));
  }
  for (int64_t d = 0; d <= docs; ++d) b.cu.push_back(static_cast<int32_t>(d * len));
  return b;
}

Result<double> TargetSecondsPerToken(dflash::SharedTarget& target, const dflash::TargetModelSpec& spec,
                                     const HostBatch& hb, int iters) {
  const int64_t t = spec.max_tokens, h = spec.config.hidden_size;
  const kernels::Device dev = target.device();
  kernels::Stream s = target.stream();
  ASSIGN_OR_RETURN(kernels::CachingPool * pool, kernels::CudaPool(dev.index));
  std::vector<kernels::Tensor> caps;
  std::vector<models::LayerCapture> lc;
  for (int64_t id : spec.layer_ids) {
    ASSIGN_OR_RETURN(kernels::Tensor c, kernels::Tensor::Empty(*pool, kernels::DType::kBF16,
                                                               {t, h}, s));
    lc.push_back({static_cast<int>(id), c.view()});
    caps.push_back(std::move(c));
  }
  ASSIGN_OR_RETURN(kernels::Tensor ids, kernels::Tensor::Empty(*pool, kernels::DType::kI32, {t}, s));
  ASSIGN_OR_RETURN(kernels::Tensor pos, kernels::Tensor::Empty(*pool, kernels::DType::kI32, {t}, s));
  ASSIGN_OR_RETURN(kernels::Tensor cu, kernels::Tensor::Empty(
                                           *pool, kernels::DType::kI32,
                                           {static_cast<int64_t>(hb.cu.size())}, s));
  RETURN_IF_ERROR(kernels::CopyFromHost(ids, hb.ids.data(), s));
  RETURN_IF_ERROR(kernels::CopyFromHost(pos, hb.pos.data(), s));
  RETURN_IF_ERROR(kernels::CopyFromHost(cu, hb.cu.data(), s));
  const int max_seqlen = hb.cu[1] - hb.cu[0];
  models::PackedBatch pb{ids.view(), pos.view(), cu.view(), max_seqlen};
  for (int i = 0; i < 2; ++i) RETURN_IF_ERROR(target.Forward(pb, lc));  // warm-up
  RETURN_IF_ERROR(kernels::SynchronizeStream(dev, s));
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) RETURN_IF_ERROR(target.Forward(pb, lc));
  RETURN_IF_ERROR(kernels::SynchronizeStream(dev, s));
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return secs / (static_cast<double>(iters) * t);
}

Result<double> DrafterSecondsPerToken(dflash::SharedTarget& target,
                                      const dflash::TargetModelSpec& spec,
                                      const ActorGroupSpec& dg, const HostBatch& hb, int iters) {
  ASSIGN_OR_RETURN(int64_t num_layers, dg.settings.GetInt("num_layers", 5));
  ASSIGN_OR_RETURN(int64_t window, dg.settings.GetInt("sliding_window", 0));
  ASSIGN_OR_RETURN(int64_t anchors, dg.settings.GetInt("anchors_per_batch", 512));
  models::DFlashConfig dc;
  dc.layers = spec.config;
  dc.layers.architectures = {"DFlashDraftModel"};
  dc.layers.num_hidden_layers = num_layers;
  // The example's layout: all sliding but the last when a window is set.
  dc.layers.layer_types.assign(num_layers, window > 0 ? models::LayerType::kSlidingAttention
                                                      : models::LayerType::kFullAttention);
  dc.layers.layer_types.back() = models::LayerType::kFullAttention;
  if (window > 0) dc.layers.sliding_window = window;
  dc.layers.tie_word_embeddings = false;
  dc.layers.rotary_dim = dc.layers.head_dim;
  dc.mask_token_id = spec.config.vocab_size - 1;
  dc.num_target_layers = spec.config.num_hidden_layers;
  dc.target_layer_ids = spec.layer_ids;
  models::DFlashTrainOptions to;
  to.max_tokens = spec.max_tokens;
  to.anchors_per_batch = anchors;
  to.total_steps = 100000;
  to.seed = 7;
  const kernels::Device dev = target.device();
  ASSIGN_OR_RETURN(kernels::CudaStream stream, kernels::CudaStream::Create(dev.index));
  ASSIGN_OR_RETURN(auto trainer, models::DFlashTrainer::Create(dc, to, dev, stream.get()));
  RETURN_IF_ERROR(trainer->drafter().params().InitFromScratch(to.seed, stream.get()));
  ASSIGN_OR_RETURN(kernels::CachingPool * pool, kernels::CudaPool(dev.index));
  const int64_t t = spec.max_tokens, h = spec.config.hidden_size;
  std::vector<kernels::Tensor> ctx;
  std::vector<kernels::TensorView> views;
  for (size_t i = 0; i < spec.layer_ids.size(); ++i) {
    // Context values do not change the step's cost; zeros plus the trainer's noise.
    ASSIGN_OR_RETURN(kernels::Tensor c, kernels::Tensor::Zeros(*pool, kernels::DType::kBF16,
                                                               {t, h}, stream.get()));
    views.push_back(c.view());
    ctx.push_back(std::move(c));
  }
  const models::DFlashTargetHead head{target.embed(), target.lm_head()};
  models::PackedBatchMeta meta{hb.ids, hb.pos, hb.cu, {}};
  for (int i = 0; i < 2; ++i) RETURN_IF_ERROR(trainer->Step(head, meta, views));
  RETURN_IF_ERROR(stream.Synchronize());
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) RETURN_IF_ERROR(trainer->Step(head, meta, views));
  RETURN_IF_ERROR(stream.Synchronize());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return secs / (static_cast<double>(iters) * t);
}

Status Run(int seconds) {
  std::ifstream f(TANDEM_PIPELINE_JOB);
  if (!f) return NotFoundError("cannot read {}", TANDEM_PIPELINE_JOB);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string text = std::regex_replace(
      ss.str(), std::regex("max_seconds = [0-9]+"), fmt::format("max_seconds = {}", seconds));
  ASSIGN_OR_RETURN(JobSpec job, ParseJobText(text, TANDEM_PIPELINE_JOB));
  const ActorGroupSpec* tg = Group(job, "target");
  const ActorGroupSpec* dg = Group(job, "drafter");
  if (tg == nullptr || dg == nullptr)
    return InvalidArgumentError("{} needs groups `target` and `drafter`", TANDEM_PIPELINE_JOB);
  ASSIGN_OR_RETURN(dflash::TargetModelSpec spec,
                   dflash::ParseTargetModelSpec(tg->settings, job.seed));
  ASSIGN_OR_RETURN(int64_t doc_len, tg->settings.GetInt("doc_len", 4096));
  const HostBatch hb = MakeBatch(spec.max_tokens, spec.max_tokens / doc_len,
                                 spec.config.vocab_size);
  // Held through (c): the job's actors reuse this copy of the weights (same key, and the
  // job runs with this registry).
  auto registry = std::make_shared<JobRegistry>();
  ASSIGN_OR_RETURN(std::shared_ptr<dflash::SharedTarget> target,
                   dflash::AcquireTarget(*registry, spec, kernels::Device::Cuda(0)));
  ASSIGN_OR_RETURN(double t_target, TargetSecondsPerToken(*target, spec, hb, 10));
  fmt::print("(a) target standalone : {:.3f} us/token ({:.0f} tok/s)\n", t_target * 1e6,
             1 / t_target);
  ASSIGN_OR_RETURN(double t_drafter, DrafterSecondsPerToken(*target, spec, *dg, hb, 10));
  fmt::print("(b) drafter standalone: {:.3f} us/token ({:.0f} tok/s)\n", t_drafter * 1e6,
             1 / t_drafter);
  const double ideal = 1 / (t_target + t_drafter);
  fmt::print("    ideal colocated   : {:.0f} tok/s\n", ideal);
  std::fflush(stdout);
  RunOptions run_options;
  run_options.registry = registry;
  JobRunner runner(run_options);
  ASSIGN_OR_RETURN(JobReport report, runner.Run(job));
  fmt::print("(c) job:\n{}\n", report.ToString());
  RETURN_IF_ERROR(report.status);
  std::smatch m;
  double measured = 0;
  for (const ActorResult& a : report.actors) {
    static const std::regex re("steady ([0-9.]+) tok/s");
    if (std::regex_search(a.summary, m, re)) measured = std::stod(m[1]);
  }
  if (measured <= 0) return InternalError("no steady tok/s in the drafter's summary");
  const double eff = measured / ideal;
  fmt::print("pipeline: measured {:.0f} tok/s, ideal {:.0f} tok/s, efficiency {:.3f} "
             "(bar >= {:.1f}: {})\n", measured, ideal, eff, kBar, eff >= kBar ? "PASS" : "FAIL");
  return Status::Ok();
}

#endif

int PipelineBench(const std::vector<std::string>& args) {
#ifdef TANDEM_HAVE_CUDA
  if (kernels::CudaDeviceCount() < 1) {
    fmt::print("pipeline: no CUDA device; skipped\n");
    return 0;
  }
  const int seconds = args.empty() ? 120 : std::stoi(args[0]);
  Status st = Run(seconds);
  if (!st.ok()) {
    fmt::print(stderr, "pipeline: {}\n", st.ToString());
    return 1;
  }
  return 0;
#else
  (void)args;
  fmt::print("pipeline: built without CUDA; skipped\n");
  return 0;
#endif
}

TANDEM_BENCH("pipeline", "colocated", "[seconds]: colocated Qwen3-8B DFlash job efficiency",
             PipelineBench);

}  // namespace
}  // namespace tandem
