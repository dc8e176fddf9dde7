// `tandem eval`: acceptance length by real DFlash speculative decoding (models/speculative):
// a terminal table, or JSON with --json. Exit code 0 on success, 2 on bad usage or input
// (missing or mismatched models, no usable prompt), 1 when decoding fails.
//
// Thread-safety: called from main() only.
#pragma once

#include <string>

#include "models/speculative/spec_eval_run.h"

namespace CLI {
class App;
}

namespace tandem::cli {

struct EvalArgs {
  models::SpecEvalRequest request;
  std::string device = "auto";  // auto | cpu | cuda | cuda:N
  std::string format = "auto";  // models::ParsePromptFormat
  bool json = false;
  std::string out;  // also write the JSON here
};

// Adds the `eval` subcommand and its options; returns it.
CLI::App* AddEvalCommand(CLI::App* app, EvalArgs* args);

int Eval(EvalArgs args, bool json);

}  // namespace tandem::cli
