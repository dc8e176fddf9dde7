// `tandem-bench pipeline [seconds] [--density=32,16,8] [--precision=bf16,fp8]
// [--optimizer-overlap] [--job=PATH]`:
// pipeline efficiency of the colocated DFlash job on one GPU. In one process: (a) the target
// alone: forward + 5 captures of a max_tokens batch, seconds per token; then per anchor
// density (one anchor per N tokens; default: the job file's anchors_per_batch): (b) the
// drafter alone: DFlashTrainer steps on random context, seconds per token; (c)
// examples/qwen3-8b-1gpu.toml through JobRunner for `seconds` (default 120) of steady state,
// tokens/s from the drafter's summary. Prints efficiency = tok/s / (1 / (t_target +
// t_drafter)), the drafter's share of the GPU time alone, the job's profile table, how long
// each side waited on the channel, and the job's bottleneck verdict; then a summary table.
// --job=PATH runs another colocated job file with groups `target` and `drafter` instead (e.g.
// examples/qwen3.6-27b-1gpu.toml, the hybrid target).
// With several target precisions it does all of that per precision, one target in
// memory at a time, and prints each precision's tok/s against bf16's at the same density.
// `tandem-bench pipeline [seconds] --checkpoint-every N`: the job with and without
// asynchronous checkpoints (RunCheckpointComparison).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "actors/dflash/drafter_settings.h"
#include "actors/dflash/target_model.h"
#include "actors/dflash/target_settings.h"
#include "bench/bench.h"
#include "models/dflash/dflash_trainer.h"
#include "runtime/core/clock.h"
#include "runtime/job/job_spec.h"
#include "runtime/job/job_spec_keys.h"
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
  // The pool the target was loaded into (the job registry's, for this device).
  kernels::Allocator* pool = &target.allocator();
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

// The drafter of the job's `drafter` group, as the actor builds it (ParseDrafterSettings and
// DrafterConfig: its layers, heads, head_dim, window and mask token, not the target's).
Result<double> DrafterSecondsPerToken(dflash::SharedTarget& target,
                                      const dflash::TargetModelSpec& spec, const JobSpec& job,
                                      const ActorGroupSpec& dg, const HostBatch& hb, int iters,
                                      bool optimizer_overlap) {
  ASSIGN_OR_RETURN(const dflash::DrafterSettings ds,
                   dflash::ParseDrafterSettings(dg.settings, JobSectionContext(job, dg.name)));
  const models::DFlashConfig dc = dflash::DrafterConfig(ds, spec);
  models::DFlashTrainOptions to = dflash::DrafterTrainOptions(ds, spec);
  to.total_steps = 100000;
  to.seed = 7;
  to.optimizer_overlap = optimizer_overlap;
  to.lm_head_fp8 = false;  // the head below is the bf16 one
  const kernels::Device dev = target.device();
  ASSIGN_OR_RETURN(kernels::CudaStream stream, kernels::CudaStream::Create(dev.index));
  // The pool the target was loaded into (the job registry's, for this device).
  kernels::Allocator* pool = &target.allocator();
  ASSIGN_OR_RETURN(auto trainer, models::DFlashTrainer::Create(dc, to, *pool, stream.get()));
  RETURN_IF_ERROR(trainer->drafter().params().InitFromScratch(to.seed, stream.get()));
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
  RETURN_IF_ERROR(trainer->drafter().JoinOptimizer());
  RETURN_IF_ERROR(stream.Synchronize());
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const kernels::AllocatorStats st = pool->stats();
  fmt::print("    device memory with the standalone drafter: {} in use, peak {} (target and "
             "drafter)\n", FormatBytes(static_cast<uint64_t>(st.in_use_bytes)),
             FormatBytes(static_cast<uint64_t>(st.high_water_in_use)));
  return secs / (static_cast<double>(iters) * t);
}

// What `tandem-bench pipeline` was asked for: steady-state seconds per job run, the anchor
// densities (one anchor per `d` tokens: anchors_per_batch = max_tokens / d) and whether the
// drafter overlaps its optimizer with the next forward.
struct PipelineArgs {
  int seconds = 120;
  std::vector<int> densities;  // empty: the job file's anchors_per_batch
  std::vector<std::string> precisions;  // the target's `precision`; empty: the job file's
  bool optimizer_overlap = false;
  int checkpoint_every = 0;  // > 0: RunCheckpointComparison instead
  std::string job = TANDEM_PIPELINE_JOB;  // --job=PATH: another colocated job file
};

// One density's numbers, for the summary table.
struct DensityResult {
  std::string precision;
  int64_t anchors = 0;
  double tok_s = 0, ideal = 0, drafter_share = 0, push_wait = 0, pop_wait = 0;
  std::string verdict;
};

// The job text with `anchors` anchors per batch (0: as written), the optimizer overlap
// key when asked, `seconds` of steady state and the target's `precision` ("": as written).
std::string JobText(const std::string& text, int seconds, int64_t anchors, bool overlap,
                    const std::string& precision) {
  std::string out = std::regex_replace(text, std::regex("max_seconds = [0-9]+"),
                                       fmt::format("max_seconds = {}", seconds));
  if (!precision.empty())
    out = std::regex_replace(out, std::regex("\\[actors\\.target\\]\n"),
                             fmt::format("$&precision = \"{}\"\n", precision));
  std::string key = anchors > 0 ? fmt::format("anchors_per_batch = {}", anchors) : "$&";
  if (overlap) key = "optimizer_overlap = true\n" + key;
  return std::regex_replace(out, std::regex("anchors_per_batch = [0-9]+"), key);
}

// Runs the job once at `anchors` per batch: the drafter alone, then the colocated job.
Result<DensityResult> RunDensity(const std::string& text, const PipelineArgs& args,
                                 int64_t anchors, double t_target,
                                 const std::shared_ptr<JobRegistry>& registry,
                                 dflash::SharedTarget& target,
                                 const dflash::TargetModelSpec& spec, const HostBatch& hb,
                                 const std::string& precision) {
  ASSIGN_OR_RETURN(JobSpec job, ParseJobText(JobText(text, args.seconds, anchors,
                                                     args.optimizer_overlap, precision),
                                             args.job));
  const ActorGroupSpec* dg = Group(job, "drafter");
  DensityResult r;
  r.precision = models::TargetPrecisionName(spec.precision);
  ASSIGN_OR_RETURN(r.anchors, dg->settings.GetInt("anchors_per_batch", 512));
  ASSIGN_OR_RETURN(double t_drafter, DrafterSecondsPerToken(target, spec, job, *dg, hb, 10,
                                                            args.optimizer_overlap));
  fmt::print("(b) drafter standalone, {} anchors per {} tokens: {:.3f} us/token ({:.0f} tok/s)\n",
             r.anchors, spec.max_tokens, t_drafter * 1e6, 1 / t_drafter);
  r.ideal = 1 / (t_target + t_drafter);
  r.drafter_share = t_drafter / (t_target + t_drafter);
  fmt::print("    ideal colocated   : {:.0f} tok/s (drafter {:.0f}% of the GPU time)\n", r.ideal,
             100 * r.drafter_share);
  std::fflush(stdout);
  RunOptions run_options;
  run_options.registry = registry;
  JobRunner runner(run_options);
  ASSIGN_OR_RETURN(JobReport report, runner.Run(job));
  fmt::print("(c) job:\n{}\n", report.ToString());
  RETURN_IF_ERROR(report.status);
  r.verdict = runner.Snapshot().verdict;
  std::smatch m;
  for (const ActorResult& a : report.actors) {
    static const std::regex re("steady ([0-9.]+) tok/s");
    if (std::regex_search(a.summary, m, re)) r.tok_s = std::stod(m[1]);
  }
  if (r.tok_s <= 0) return InternalError("no steady tok/s in the drafter's summary");
  for (const ChannelStats& c : report.channels) {
    if (c.name != "hidden") continue;
    r.push_wait = c.push_wait_total_ns * 1e-9 / std::max(report.seconds, 1e-9);
    r.pop_wait = c.pop_wait_total_ns * 1e-9 / std::max(report.seconds, 1e-9);
  }
  const double eff = r.tok_s / r.ideal;
  fmt::print("pipeline, {} anchors: measured {:.0f} tok/s, ideal {:.0f} tok/s, efficiency {:.3f} "
             "(bar >= {:.1f}: {})\nverdict: {}\n", r.anchors, r.tok_s, r.ideal, eff, kBar,
             eff >= kBar ? "PASS" : "FAIL", r.verdict);
  return r;
}

// (a), then (b) and (c) per density, with the target at `precision` ("": the job file's).
Status RunPrecision(const std::string& text, const PipelineArgs& args,
                    const std::string& precision, std::vector<DensityResult>& results) {
  ASSIGN_OR_RETURN(JobSpec job, ParseJobText(JobText(text, args.seconds, 0, false, precision),
                                             args.job));
  const ActorGroupSpec* tg = Group(job, "target");
  const ActorGroupSpec* dg = Group(job, "drafter");
  if (tg == nullptr || dg == nullptr)
    return InvalidArgumentError("{} needs groups `target` and `drafter`", args.job);
  ASSIGN_OR_RETURN(dflash::TargetModelSpec spec,
                   dflash::ParseTargetModelSpec(tg->settings, job.seed));
  ASSIGN_OR_RETURN(int64_t doc_len, tg->settings.GetInt("doc_len", 4096));
  const HostBatch hb = MakeBatch(spec.max_tokens, spec.max_tokens / doc_len,
                                 spec.config.vocab_size);
  // Held through (c): the job's actors reuse this copy of the weights (same key, and the
  // job runs with this registry); released before the next precision loads its own.
  auto registry = std::make_shared<JobRegistry>();
  ASSIGN_OR_RETURN(std::shared_ptr<dflash::SharedTarget> target,
                   dflash::AcquireTarget(*registry, spec, kernels::Device::Cuda(0)));
  ASSIGN_OR_RETURN(double t_target, TargetSecondsPerToken(*target, spec, hb, 10));
  fmt::print("== target precision {} ==\n(a) target standalone : {:.3f} us/token ({:.0f} "
             "tok/s)\n", models::TargetPrecisionName(spec.precision), t_target * 1e6,
             1 / t_target);
  fmt::print("    device memory with the target loaded: {} in use\n",
             FormatBytes(static_cast<uint64_t>(target->allocator().stats().in_use_bytes)));
  std::vector<int64_t> anchors;
  for (int d : args.densities) anchors.push_back(spec.max_tokens / d);
  if (anchors.empty()) anchors.push_back(0);  // as the job file says
  for (int64_t a : anchors) {
    ASSIGN_OR_RETURN(DensityResult r, RunDensity(text, args, a, t_target, registry, *target,
                                                 spec, hb, precision));
    results.push_back(std::move(r));
  }
  return Status::Ok();
}

Status Run(const PipelineArgs& args) {
  ASSIGN_OR_RETURN(const std::string text, ReadJobFile(args.job));
  fmt::print("job file: {}\n", args.job);
  std::vector<std::string> precisions = args.precisions;
  if (precisions.empty()) precisions.push_back("");
  std::vector<DensityResult> results;
  for (const std::string& p : precisions) RETURN_IF_ERROR(RunPrecision(text, args, p, results));
  fmt::print("\nsummary (optimizer overlap {}):\n{:>9} {:>16} {:>9} {:>9} {:>6} {:>9} {:>10} "
             "{:>10}  verdict\n", args.optimizer_overlap ? "on" : "off", "target", "anchors",
             "tok/s", "ideal", "eff", "drafter%", "push wait", "pop wait");
  for (const DensityResult& r : results)
    fmt::print("{:>9} {:>6} anchors {:>9.0f} {:>9.0f} {:>6.3f} {:>8.0f}% {:>9.0f}% {:>9.0f}%  {}\n",
               r.precision, r.anchors, r.tok_s, r.ideal, r.tok_s / r.ideal,
               100 * r.drafter_share, 100 * r.push_wait, 100 * r.pop_wait, r.verdict);
  // The FP8 bar: the FP8 target's pipeline >= 1.35x bf16's at the same density, with
  // efficiency still >= 0.9.
  for (const DensityResult& r : results) {
    if (r.precision == "bf16") continue;
    for (const DensityResult& b : results)
      if (b.precision == "bf16" && b.anchors == r.anchors)
        fmt::print("{} vs bf16, {} anchors: {:.3f}x tok/s (bar >= 1.35: {}), efficiency {:.3f} "
                   "(bar >= 0.9: {})\n", r.precision, r.anchors, r.tok_s / b.tok_s,
                   r.tok_s / b.tok_s >= 1.35 ? "PASS" : "FAIL", r.tok_s / r.ideal,
                   r.tok_s / r.ideal >= 0.9 ? "PASS" : "FAIL");
  }
  return Status::Ok();
}

// [seconds] [--density=32,16,8] [--precision=bf16,fp8] [--optimizer-overlap]
// [--checkpoint-every N]
Result<PipelineArgs> ParseArgs(const std::vector<std::string>& args) {
  PipelineArgs out;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a.rfind("--density=", 0) == 0) {
      std::stringstream list(a.substr(10));
      for (std::string item; std::getline(list, item, ',');) {
        const int d = std::atoi(item.c_str());
        if (d < 1 || std::to_string(d) != item)
          return InvalidArgumentError("pipeline: --density takes tokens per anchor (e.g. "
                                      "--density=32,16,8), not \"{}\"", item);
        out.densities.push_back(d);
      }
    } else if (a.rfind("--precision=", 0) == 0) {
      std::stringstream list(a.substr(12));
      for (std::string item; std::getline(list, item, ',');) {
        Result<models::TargetPrecision> p = models::ParseTargetPrecision(item);
        if (!p.ok()) return InvalidArgumentError("pipeline: --precision: {}", p.status().ToString());
        out.precisions.push_back(item);
      }
    } else if (a.rfind("--job=", 0) == 0) {
      out.job = a.substr(6);
      if (out.job.empty()) return InvalidArgumentError("pipeline: --job= needs a job file");
    } else if (a == "--optimizer-overlap") {
      out.optimizer_overlap = true;
    } else if (a == "--checkpoint-every") {
      if (++i == args.size())
        return InvalidArgumentError("pipeline: --checkpoint-every needs a number of steps");
      out.checkpoint_every = std::atoi(args[i].c_str());
      if (out.checkpoint_every < 1 || std::to_string(out.checkpoint_every) != args[i])
        return InvalidArgumentError("pipeline: --checkpoint-every takes steps, not \"{}\"",
                                    args[i]);
    } else if (!a.empty() && a.find_first_not_of("0123456789") == std::string::npos) {
      out.seconds = std::stoi(a);
    } else {
      return InvalidArgumentError("pipeline: unknown argument \"{}\" (usage: [seconds] "
                                  "[--density=32,16,8] [--precision=bf16,fp8] "
                                  "[--optimizer-overlap] [--checkpoint-every N] [--job=PATH])", a);
    }
  }
  return out;
}

// `pipeline SECONDS --checkpoint-every N`: the job without checkpoints, then the
// same job with an asynchronous checkpoint every N steps into a fresh directory under
// $TANDEM_BENCH_CKPT_DIR (default /tmp), removed afterwards. Bars: steady tok/s with
// checkpoints >= 0.95 of without; no checkpoint holds the training loop over 1 s. Prints the
// snapshot time, write time and write bandwidth from the drafter's summary.
Result<std::string> DrafterSummary(const std::string& text, const RunOptions& options) {
  ASSIGN_OR_RETURN(JobSpec job, ParseJobText(text, TANDEM_PIPELINE_JOB));
  JobRunner runner(options);
  ASSIGN_OR_RETURN(JobReport report, runner.Run(job));
  fmt::print("{}\n", report.ToString());
  std::fflush(stdout);
  RETURN_IF_ERROR(report.status);
  for (const ActorResult& a : report.actors)
    if (a.summary.find("steady") != std::string::npos) return a.summary;
  return InternalError("no drafter summary in the report");
}

Status RunCheckpointComparison(int seconds, int every) {
  ASSIGN_OR_RETURN(const std::string text, ReadJobFile(TANDEM_PIPELINE_JOB));
  const std::string base = std::regex_replace(
      text, std::regex("max_seconds = [0-9]+"), fmt::format("max_seconds = {}", seconds));
  const char* root = std::getenv("TANDEM_BENCH_CKPT_DIR");
  const std::string dir = fmt::format("{}/tandem-ckpt-bench-{}", root ? root : "/tmp", getpid());
  // 14 bytes per drafter parameter (~15 GB for the 1 B-parameter drafter) fit in 16 GB.
  // keep_last = 1: a 90 s run writes 5+ checkpoints, more than the H200 host's 64 GB disk holds.
  const std::string with = std::regex_replace(
      base, std::regex("\\[actors\\.drafter\\]\n"),
      fmt::format("[actors.drafter]\ncheckpoint = {{ dir = \"{}\", every_steps = {}, "
                  "keep_last = 1 }}\n"
                  "pinned_bytes = 16000000000\n", dir, every));
  RunOptions options;
  options.registry = std::make_shared<JobRegistry>();  // both runs share the target weights
  fmt::print("== without checkpoints ==\n");
  ASSIGN_OR_RETURN(std::string off, DrafterSummary(base, options));
  fmt::print("== checkpoint every {} steps into {} ==\n", every, dir);
  Result<std::string> on = DrafterSummary(with, options);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (!on.ok()) return on.status();
  auto number = [](const std::string& s, const char* re) {
    std::smatch m;
    return std::regex_search(s, m, std::regex(re)) ? std::stod(m[1]) : -1.0;
  };
  const double tok_off = number(off, "steady ([0-9.]+) tok/s");
  const double tok_on = number(*on, "steady ([0-9.]+) tok/s");
  const double stall = number(*on, "stall max ([0-9.]+) s");
  const double ratio = tok_on / tok_off;
  fmt::print("checkpoints: {}\n", on->substr(on->find("checkpoints ")));
  fmt::print("pipeline checkpoint: steady {:.0f} tok/s with, {:.0f} without, ratio {:.3f} "
             "(bar >= 0.95: {}); longest stall {:.3f} s (bar <= 1 s: {})\n",
             tok_on, tok_off, ratio, ratio >= 0.95 ? "PASS" : "FAIL", stall,
             stall >= 0 && stall <= 1.0 ? "PASS" : "FAIL");
  return Status::Ok();
}

#endif

int PipelineBench(const std::vector<std::string>& args) {
#ifdef TANDEM_HAVE_CUDA
  if (kernels::CudaDeviceCount() < 1) {
    fmt::print("pipeline: no CUDA device; skipped\n");
    return 0;
  }
  Result<PipelineArgs> parsed = ParseArgs(args);
  Status st = !parsed.ok() ? parsed.status()
              : parsed->checkpoint_every > 0
                  ? RunCheckpointComparison(parsed->seconds, parsed->checkpoint_every)
                  : Run(*parsed);
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

TANDEM_BENCH("pipeline", "colocated",
             "[seconds] [--density=32,16,8] [--precision=bf16,fp8] [--optimizer-overlap] "
             "[--checkpoint-every N]: colocated Qwen3-8B DFlash job efficiency, at one anchor "
             "per N tokens for each density and each target precision; with --checkpoint-every, "
             "steady tok/s with async checkpoints against none",
             PipelineBench);

}  // namespace
}  // namespace tandem
