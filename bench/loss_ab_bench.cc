// `tandem-bench loss-ab [steps] [--b=target-fp8|lm-head-fp8]`: does an FP8
// path change what the drafter learns? Runs the colocated 8B-shaped job
// (examples/qwen3-8b-1gpu.toml: random Qwen3-8B-shaped target, 5-layer drafter, synthetic
// documents) for a fixed number of steps three times, all with the job's seed, so the target
// weights and the data are the same:
//   A   bf16 (the default), drafter seed 1;
//   A'  bf16, drafter seed 2: the run-to-run spread (another init and noise, same data);
//   B   A with the FP8 path: the target's projections (`precision = "fp8"`) or the
//       drafter's frozen LM head (`lm_head_precision = "fp8"`); drafter seed 1.
// Each run's losses come from its metrics file (every 10 steps; the LR schedule's length is
// `steps`). Prints the three curves side by side, then |B - A| against |A' - A| (mean and
// max over the logs, and over the second half), and says whether B stays within the spread.
// The example's target_config sets Qwen3-8B's initializer_range (0.02), so the random
// target's embedding and LM head have a fresh HF model's spread and the logits a realistic
// scale (std ~1.3). A head uniform in +-1 (logit std ~37, losses ~70) is what no trained
// model has, and it magnifies any e4m3 logit error. With --b=lm-head-fp8, B's logged loss is
// itself computed from FP8 logits.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "bench/bench.h"
#include "runtime/job/job_spec.h"
#include "runtime/job/runner.h"

#ifdef TANDEM_HAVE_CUDA
#include "kernels/core/stream.h"
#endif

namespace tandem {
namespace {

#ifdef TANDEM_HAVE_CUDA

struct LossAbArgs {
  int steps = 150;
  std::string b = "target-fp8";  // or "lm-head-fp8"
};

// One run: step -> loss, from the job's metrics file.
using Curve = std::map<int64_t, double>;

Result<Curve> ReadCurve(const std::string& path) {
  std::ifstream f(path);
  if (!f) return NotFoundError("cannot read the metrics file {}", path);
  static const std::regex re(R"re("kind": "train".*"step": ([0-9]+),.*"loss": ([-+0-9.eEna]+),)re");
  Curve c;
  std::smatch m;
  for (std::string line; std::getline(f, line);)
    if (std::regex_search(line, m, re)) c[std::stoll(m[1])] = std::stod(m[2]);
  if (c.empty()) return DataLossError("{}: no train lines", path);
  return c;
}

// The job text for one run: `steps` steps (no time limit), logs every 10, metrics to `metrics`,
// drafter seed `seed`, and the B side's key when `b` is set.
std::string RunText(const std::string& text, int steps, const std::string& metrics, int seed,
                    const std::string& b) {
  auto set = [](std::string s, const char* re, const std::string& value) {
    return std::regex_replace(s, std::regex(re), value);
  };
  std::string out = set(text, "max_seconds = [0-9]+", "max_seconds = 0");
  out = set(out, "max_steps = [0-9]+", fmt::format("max_steps = {}", steps));
  out = set(out, "total_steps = [0-9]+", fmt::format("total_steps = {}", steps));
  out = set(out, "log_every = [0-9]+", "log_every = 10");
  std::string drafter = fmt::format("$&metrics_file = \"{}\"\nseed = {}\n", metrics, seed);
  if (b == "lm-head-fp8") drafter += "lm_head_precision = \"fp8\"\n";
  out = set(out, "\\[actors\\.drafter\\]\n", drafter);
  if (b == "target-fp8") out = set(out, "\\[actors\\.target\\]\n", "$&precision = \"fp8\"\n");
  return out;
}

// Runs the job `text`, whose metrics go to `metrics`, and reads its curve from there.
Result<Curve> RunOne(const std::string& text, const std::string& metrics,
                     const std::string& label, const RunOptions& opts) {
  fmt::print("== {} ==\n", label);
  std::fflush(stdout);
  ASSIGN_OR_RETURN(JobSpec job, ParseJobText(text, TANDEM_PIPELINE_JOB));
  JobRunner runner(opts);
  ASSIGN_OR_RETURN(JobReport report, runner.Run(job));
  fmt::print("{}\n", report.ToString());
  RETURN_IF_ERROR(report.status);
  return ReadCurve(metrics);
}

struct Diff {
  double mean = 0, max = 0;
};
// |x - y| over the steps both curves logged from `from` on.
Diff Compare(const Curve& x, const Curve& y, int64_t from) {
  Diff d;
  int n = 0;
  for (const auto& [step, lx] : x) {
    auto it = y.find(step);
    if (step < from || it == y.end()) continue;
    const double e = std::fabs(lx - it->second);
    d.mean += e;
    d.max = std::max(d.max, e);
    ++n;
  }
  if (n > 0) d.mean /= n;
  return d;
}

Status Run(const LossAbArgs& args) {
  ASSIGN_OR_RETURN(const std::string text, ReadJobFile(TANDEM_PIPELINE_JOB));
  const char* root = std::getenv("TMPDIR");
  const std::string dir = fmt::format("{}/tandem-loss-ab-{}", root ? root : "/tmp", getpid());
  std::filesystem::create_directories(dir);
  RunOptions bf16;
  bf16.registry = std::make_shared<JobRegistry>();  // A and A' share the bf16 target
  const std::string b_label = args.b == "target-fp8" ? "FP8 target" : "FP8 LM head";
  // One run: drafter seed `seed`, the B side's key when `b` is set, metrics to DIR/NAME.
  auto run = [&](const std::string& name, int seed, const std::string& b,
                 const std::string& label, const RunOptions& opts) {
    const std::string metrics = dir + "/" + name;
    return RunOne(RunText(text, args.steps, metrics, seed, b), metrics, label, opts);
  };
  ASSIGN_OR_RETURN(Curve a, run("a.jsonl", 1, "", "A: bf16, drafter seed 1", bf16));
  ASSIGN_OR_RETURN(Curve a2, run("a2.jsonl", 2, "", "A': bf16, drafter seed 2 (the spread)",
                                 bf16));
  RunOptions b_opts;
  if (args.b == "target-fp8") bf16.registry.reset();  // free the bf16 target first
  b_opts.registry = args.b == "target-fp8" ? std::make_shared<JobRegistry>() : bf16.registry;
  ASSIGN_OR_RETURN(Curve b, run("b.jsonl", 1, args.b,
                                 fmt::format("B: {}, drafter seed 1", b_label), b_opts));
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);

  fmt::print("\nloss every 10 steps ({} steps, same target weights and data):\n"
             "{:>6} {:>10} {:>10} {:>10} {:>9} {:>9}\n", args.steps, "step", "A bf16",
             "A' seed 2", "B", "|B-A|", "|A'-A|");
  for (const auto& [step, la] : a) {
    const double l2 = a2.count(step) ? a2.at(step) : NAN, lb = b.count(step) ? b.at(step) : NAN;
    fmt::print("{:>6} {:>10.4f} {:>10.4f} {:>10.4f} {:>9.4f} {:>9.4f}\n", step, la, l2, lb,
               std::fabs(lb - la), std::fabs(l2 - la));
  }
  const int64_t half = args.steps / 2;
  const Diff ba = Compare(b, a, 0), sa = Compare(a2, a, 0);
  const Diff ba2 = Compare(b, a, half), sa2 = Compare(a2, a, half);
  fmt::print("|B-A| mean {:.4f} max {:.4f}; spread |A'-A| mean {:.4f} max {:.4f}\n", ba.mean,
             ba.max, sa.mean, sa.max);
  fmt::print("second half (step >= {}): |B-A| mean {:.4f} max {:.4f}; spread mean {:.4f} max "
             "{:.4f}\n", half, ba2.mean, ba2.max, sa2.mean, sa2.max);
  fmt::print("final loss: A {:.4f}, A' {:.4f}, B {:.4f}\n", a.rbegin()->second,
             a2.rbegin()->second, b.rbegin()->second);
  fmt::print("loss-ab ({}): B within the run-to-run spread: {}\n", b_label,
             ba.mean <= sa.mean && ba2.max <= sa2.max ? "PASS" : "FAIL");
  return Status::Ok();
}

Result<LossAbArgs> ParseArgs(const std::vector<std::string>& args) {
  LossAbArgs out;
  for (const std::string& a : args) {
    if (a == "--b=target-fp8" || a == "--b=lm-head-fp8") {
      out.b = a.substr(4);
    } else if (!a.empty() && a.size() < 7 &&
               a.find_first_not_of("0123456789") == std::string::npos) {
      out.steps = std::stoi(a);
      if (out.steps < 20) return InvalidArgumentError("loss-ab: steps must be >= 20, not {}", a);
    } else {
      return InvalidArgumentError("loss-ab: unknown argument \"{}\" (usage: [steps] "
                                  "[--b=target-fp8|lm-head-fp8])", a);
    }
  }
  return out;
}

#endif

int LossAbBench(const std::vector<std::string>& args) {
#ifdef TANDEM_HAVE_CUDA
  if (kernels::CudaDeviceCount() < 1) {
    fmt::print("loss-ab: no CUDA device; skipped\n");
    return 0;
  }
  Result<LossAbArgs> parsed = ParseArgs(args);
  Status st = parsed.ok() ? Run(*parsed) : parsed.status();
  if (!st.ok()) {
    fmt::print(stderr, "loss-ab: {}\n", st.ToString());
    return 1;
  }
  return 0;
#else
  (void)args;
  fmt::print("loss-ab: built without CUDA; skipped\n");
  return 0;
#endif
}

TANDEM_BENCH("loss-ab", "curves",
             "[steps] [--b=target-fp8|lm-head-fp8]: drafter loss curves of the 8B-shaped job, "
             "bf16 against the FP8 target or FP8 LM head, with a second bf16 seed as the spread",
             LossAbBench);

}  // namespace
}  // namespace tandem
