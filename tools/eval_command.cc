#include "tools/eval_command.h"

#include <cmath>
#include <cstdio>
#include <fstream>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include "kernels/core/stream.h"

namespace tandem::cli {

CLI::App* AddEvalCommand(CLI::App* app, EvalArgs* a) {
  models::SpecEvalRequest& q = a->request;
  auto* eval = app->add_subcommand(
      "eval", "acceptance length (tau) of a DFlash drafter by speculative decoding");
  eval->add_option("--target", q.target_dir,
                   "target model directory (HF layout, by config.json's model_type: qwen3, "
                   "qwen3_moe, llama, or the Qwen3.5 / 3.6 hybrid qwen3_5[_moe][_text])")
      ->required();
  eval->add_option("--drafter", q.drafter_dir,
                   "DFlash drafter directory (config.json + model.safetensors)")
      ->required();
  eval->add_option("--prompts", q.prompts_file,
                   "JSONL, one prompt per line: token ids, chat messages, or a public set's "
                   "layout (see --format)")
      ->required();
  eval->add_option("--format", a->format,
                   "prompt layout: auto (detected per file), ids, openai, sharegpt, mt-bench, "
                   "gsm8k, math500, humaneval, mbpp")
      ->capture_default_str();
  eval->add_option("--tokenizer", q.tokenizer_dir,
                   "tokenizer.json + tokenizer_config.json for text and chat prompts "
                   "(default: the target's directory)");
  eval->add_option_function<bool>(
      "--enable-thinking", [&q](const bool& on) { q.enable_thinking = on; },
      "true|false: the chat template's enable_thinking (Qwen3: false renders an empty "
      "<think></think> block); default: unset, the template's own default");
  eval->add_flag("--skip-bad", q.skip_bad,
                 "skip and count bad prompt lines (malformed, empty, too long, bad token id) "
                 "instead of failing on the first");
  eval->add_option("--max-line-bytes", q.max_line_bytes,
                   "longer prompt lines are bad lines, neither parsed nor tokenized (0: no limit)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  eval->add_option("--batch", q.batch,
                   "prompts decoded at once (one drafter and one target forward per step for "
                   "all of them)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  eval->add_option("--max-new-tokens", q.max_new_tokens, "tokens to generate per prompt")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  eval->add_option("--temperature", q.temperature,
                   "0: greedy only; above 0 also a run by speculative sampling at this "
                   "temperature (drafts sampled by the drafter, kept with probability "
                   "min(1, p/q)), tau reported for both")
      ->capture_default_str();
  eval->add_option("--top-p", q.top_p,
                   "the sampled run's nucleus: the fewest most likely tokens whose mass "
                   "reaches P, in (0, 1] (1: off)")
      ->capture_default_str();
  eval->add_option("--top-k", q.top_k, "the sampled run's top-k, >= 0 (0: off)")
      ->capture_default_str();
  eval->add_flag("--greedy-drafts", q.greedy_drafts,
                 "the sampled run's drafts are the drafter's argmax (q one-hot: kept with "
                 "probability p(x)), as z-lab's loop and servers' greedy drafts; default: "
                 "sampled from the drafter's filtered distribution");
  eval->add_option("--block-size", q.block_size,
                   "slots verified per step, 1 .. the drafter's (default: the drafter's)")
      ->check(CLI::PositiveNumber);
  eval->add_option("--seed", q.seed,
                   "the sampled run's seed: draws keyed by (seed, prompt, step, position), the "
                   "same at any --batch")
      ->capture_default_str();
  eval->add_option("--max-prompts", q.max_prompts, "use the first N usable prompts (0: all)")
      ->check(CLI::NonNegativeNumber);
  eval->add_option("--max-prompt-tokens", q.max_prompt_tokens,
                   "longer prompts are bad lines (also past max_position_embeddings - "
                   "max_new_tokens - block size + 1)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  eval->add_option("--stop", q.stop_token_ids,
                   "stop token ids (default: the target's eos_token_id)");
  eval->add_option("--device", a->device, "auto, cpu, cuda or cuda:N")->capture_default_str();
  eval->add_flag("--no-baseline", [&q](int64_t) { q.baseline = false; },
                 "skip the block-size-1 run (no speedup reported)");
  eval->add_flag("--json", a->json, "print the report as JSON");
  eval->add_option("-o,--output", a->out, "also write the JSON report to this file");
  return eval;
}

namespace {

// A GPU that is not there is the user's error, said here, before anything touches CUDA.
Result<kernels::Device> CudaDevice(const std::string& s, int index) {
  const int count = kernels::CudaDeviceCount();
  if (count == 0)
    return InvalidArgumentError("--device {}: no CUDA GPU is visible here (check nvidia-smi "
                                "and CUDA_VISIBLE_DEVICES), or use --device cpu", s);
  if (index >= count)
    return InvalidArgumentError("--device {}: only {} CUDA GPU{} visible (cuda:0 .. cuda:{})", s,
                                count, count == 1 ? " is" : "s are", count - 1);
  return kernels::Device::Cuda(index);
}

Result<kernels::Device> ParseDevice(const std::string& s) {
  if (s == "cpu") return kernels::Device::Cpu();
  if (s == "auto")
    return kernels::CudaDeviceCount() > 0 ? kernels::Device::Cuda(0) : kernels::Device::Cpu();
  if (s == "cuda") return CudaDevice(s, 0);
  if (s.rfind("cuda:", 0) == 0) {
    const std::string n = s.substr(5);
    if (!n.empty() && n.size() <= 4 && n.find_first_not_of("0123456789") == std::string::npos)
      return CudaDevice(s, std::stoi(n));
  }
  return InvalidArgumentError("--device {}: expected auto, cpu, cuda or cuda:N", s);
}

// The sampling flags, each named in its error.
Status CheckSamplingFlags(const models::SpecEvalRequest& q) {
  if (!(q.temperature >= 0.0f) || !std::isfinite(q.temperature))
    return InvalidArgumentError("--temperature {}: must be finite and >= 0", q.temperature);
  if (!(q.top_p > 0.0f && q.top_p <= 1.0f))
    return InvalidArgumentError("--top-p {}: must be in (0, 1] (1: off)", q.top_p);
  if (q.top_k < 0) return InvalidArgumentError("--top-k {}: must be >= 0 (0: off)", q.top_k);
  if (q.temperature == 0.0f && (q.top_p != 1.0f || q.top_k != 0 || q.greedy_drafts))
    return InvalidArgumentError("--top-p, --top-k and --greedy-drafts shape the sampled run: "
                                "give --temperature above 0 too");
  return Status::Ok();
}

}  // namespace

int Eval(EvalArgs a, bool json) {
  if (Status st = CheckSamplingFlags(a.request); !st.ok()) {
    fmt::print(stderr, "tandem eval: {}\n", st.ToString());
    return 2;
  }
  auto device = ParseDevice(a.device);
  if (!device.ok()) {
    fmt::print(stderr, "tandem eval: {}\n", device.status().ToString());
    return 2;
  }
  a.request.device = *device;
  auto format = models::ParsePromptFormat(a.format);
  if (!format.ok()) {
    fmt::print(stderr, "tandem eval: --format: {}\n", format.status().ToString());
    return 2;
  }
  a.request.prompt_format = *format;
  auto report = models::RunSpecEval(a.request);
  if (!report.ok()) {
    fmt::print(stderr, "tandem eval: {}\n", report.status().ToString());
    return report.status().code() == StatusCode::kInvalidArgument ||
                   report.status().code() == StatusCode::kNotFound ||
                   report.status().code() == StatusCode::kDataLoss
               ? 2
               : 1;
  }
  const std::string text = models::SpecEvalReportToJson(*report).dump(2);
  if (!a.out.empty()) {
    std::ofstream f(a.out);
    f << text << "\n";
    if (!f) {
      fmt::print(stderr, "tandem eval: cannot write {}\n", a.out);
      return 2;
    }
  }
  if (json || a.json)
    fmt::print("{}\n", text);
  else
    fmt::print("{}", models::FormatSpecEvalReport(*report));
  return 0;
}

}  // namespace tandem::cli
