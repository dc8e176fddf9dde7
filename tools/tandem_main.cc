// tandem: the command-line front end. Thin: parses flags and calls the libraries.
//   tandem run [JOB.toml]       run a job on the embedded runtime (default: the built-in job)
//   tandem validate JOB.toml    check a job file without running it
// Exit codes: 0 success, 1 the job failed, 2 bad usage or a bad job file.
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>

#include <CLI/CLI.hpp>

#include "runtime/control/job_spec.h"
#include "runtime/control/runner.h"
#include "runtime/core/logging.h"
#include "tools/default_job.h"

namespace {

tandem::JobRunner* g_runner = nullptr;

void OnSignal(int) {
  if (g_runner != nullptr) g_runner->RequestStop();
}

tandem::Result<tandem::JobSpec> LoadJob(const std::string& path) {
  if (path.empty()) return tandem::ParseJobText(tandem::kDefaultJobText, tandem::kDefaultJobName);
  return tandem::LoadJobFile(path);
}

int Run(const std::string& path) {
  auto job = LoadJob(path);
  if (!job.ok()) {
    std::fprintf(stderr, "tandem run: %s\n", job.status().ToString().c_str());
    return 2;
  }
  tandem::JobRunner runner;
  g_runner = &runner;
  std::signal(SIGINT, OnSignal);
  std::signal(SIGTERM, OnSignal);
  auto report = runner.Run(*job);
  g_runner = nullptr;
  if (!report.ok()) {
    std::fprintf(stderr, "tandem run: %s\n", report.status().ToString().c_str());
    return 2;
  }
  std::printf("%s", report->ToString().c_str());
  return report->status.ok() ? 0 : 1;
}

int Validate(const std::string& path) {
  auto job = tandem::LoadJobFile(path);
  if (!job.ok()) {
    std::fprintf(stderr, "tandem validate: %s\n", job.status().ToString().c_str());
    return 2;
  }
  std::printf("%s: ok (%zu channels, %zu actor groups)\n", path.c_str(), job->channels.size(),
              job->actors.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tandem: an actor runtime for training DFlash drafters"};
  app.require_subcommand(1);
  std::string run_path, validate_path;
  auto* run = app.add_subcommand("run", "run a job on the embedded runtime");
  run->add_option("job", run_path, "job file (TOML); default: the built-in job");
  auto* validate = app.add_subcommand("validate", "check a job file without running it");
  validate->add_option("job", validate_path, "job file (TOML)")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  }
  if (*run) return Run(run_path);
  if (*validate) return Validate(validate_path);
  return 2;
}
