// `tandem-bench checkpoint`: how fast a drafter checkpoint reaches the disk, store-free and
// GPU-free, side by side with `dd` on the same directory in the same command.
//
// The state is a Qwen3-8B-shaped drafter's (hidden 4096, 32/8 heads of 128, MLP 12288, fc over
// 5 target layers; `--layers` decoder layers, 14 bytes per parameter: bf16 weights, fp32
// master weights and both AdamW moments) filled with random bytes. Each repetition runs:
//   dd      dd if=/dev/zero bs=16M oflag=direct conv=fsync, as many bytes as the checkpoint;
//   before  the writer before this change: one file after the other through AtomicFileWriter
//           (buffered writes, fsync, rename), then CommitState reads every file back to hash;
//   after   WriteDFlashCheckpoint (models/io/file_set_writer.h: parallel chunks, O_DIRECT,
//           digests while writing) and CommitState with those digests.
// Both end in the real commit (tandem_state.json, `latest`, directory fsyncs). Each writes a
// fresh step directory, removed afterwards. Prints each method's best and mean bandwidth
// and the ratios to dd.
//
// Args: --dir=DIR (default ./tandem-checkpoint-bench, created), --layers=N (1: 3.9 GB; 5 is
// the 14.7 GB checkpoint of the H200 runs), --reps=R (2), --threads=T (4), --chunk-mib=M
// (32), --buffered (no O_DIRECT for `after`), --after-only (skip `before`).
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "actors/dflash/checkpoint/checkpoint_state.h"
#include "bench/bench.h"
#include "kernels/core/memory.h"
#include "models/dflash/dflash_checkpoint.h"
#include "models/dflash/dflash_params.h"
#include "models/io/file_digest.h"
#include "models/io/file_util.h"
#include "models/io/safetensors_writer.h"

namespace tandem::bench {
namespace {

namespace fs = std::filesystem;
using kernels::DType;

struct Args {
  std::string dir = "./tandem-checkpoint-bench";
  int layers = 1;
  int reps = 2;
  bool before = true;  // false: --after-only (tuning the new writer)
  models::FileSetWriteOptions io;
};

bool ParseArgs(const std::vector<std::string>& args, Args* a) {
  for (const std::string& s : args) {
    auto value = [&](const char* flag) -> const char* {
      const size_t n = std::strlen(flag);
      return s.compare(0, n, flag) == 0 ? s.c_str() + n : nullptr;
    };
    if (const char* v = value("--dir=")) {
      a->dir = v;
    } else if (const char* v = value("--layers=")) {
      a->layers = std::atoi(v);
    } else if (const char* v = value("--reps=")) {
      a->reps = std::atoi(v);
    } else if (const char* v = value("--threads=")) {
      a->io.io_threads = std::atoi(v);
    } else if (const char* v = value("--chunk-mib=")) {
      a->io.chunk_bytes = static_cast<uint64_t>(std::atoi(v)) << 20;
    } else if (s == "--after-only") {
      a->before = false;
    } else if (s == "--buffered") {
      a->io.direct = false;
    } else {
      std::fprintf(stderr, "checkpoint: unknown argument '%s'\n", s.c_str());
      return false;
    }
  }
  if (a->layers < 1 || a->layers > 64 || a->reps < 1) {
    std::fprintf(stderr, "checkpoint: --layers in [1, 64] and --reps >= 1\n");
    return false;
  }
  return true;
}

models::DFlashConfig Drafter8b(int layers) {
  models::DFlashConfig c;
  models::TransformerConfig& t = c.layers;
  t.model_type = "qwen3";
  t.architectures = {"DFlashDraftModel"};
  t.vocab_size = 151936;
  t.hidden_size = 4096;
  t.num_hidden_layers = layers;
  t.num_attention_heads = 32;
  t.num_key_value_heads = 8;
  t.head_dim = 128;
  t.rotary_dim = 128;
  t.intermediate_size = 12288;
  t.max_position_embeddings = 40960;
  t.rope_theta = 1e6;
  t.layer_types.assign(layers, models::LayerType::kFullAttention);
  c.block_size = 16;
  c.mask_token_id = 151669;
  c.num_target_layers = 36;
  c.target_layer_ids = models::DFlashTargetLayerIds(36, 5);
  return c;
}

void FillRandom(kernels::Tensor& t, uint64_t seed) {
  auto* p = static_cast<uint64_t*>(t.data());
  const size_t words = static_cast<size_t>(t.nbytes()) / 8;
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  for (size_t i = 0; i < words; ++i) {  // splitmix64
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    p[i] = z ^ (z >> 31);
  }
}

std::span<const std::byte> Bytes(const void* p, int64_t n) {
  return {static_cast<const std::byte*>(p), static_cast<size_t>(n)};
}

// The checkpoint writer as it was before file_set_writer.h: each file written in turn
// through AtomicFileWriter; CommitState then reads each one back for its digest.
Status WriteBefore(const std::string& dir, const models::DFlashConfig& config,
                   const models::DFlashParamLayout& layout, const models::DFlashHostState& h) {
  fs::create_directories(dir);
  RETURN_IF_ERROR(models::WriteDFlashConfig(dir + "/config.json", config));
  const auto* w = h.weights.view().data_as<kernels::bf16>();
  const auto* master = h.master.view().data_as<float>();
  const auto* m = h.adam_m.view().data_as<float>();
  const auto* v = h.adam_v.view().data_as<float>();
  std::vector<models::TensorToWrite> model, opt;
  for (const models::DFlashParamSpec& sp : layout.specs) {
    const int64_t n = sp.numel();
    model.push_back({sp.name, DType::kBF16, sp.shape, Bytes(&w[sp.offset], n * 2)});
    opt.push_back({"master." + sp.name, DType::kF32, sp.shape, Bytes(&master[sp.offset], n * 4)});
    opt.push_back({"exp_avg." + sp.name, DType::kF32, sp.shape, Bytes(&m[sp.offset], n * 4)});
    opt.push_back({"exp_avg_sq." + sp.name, DType::kF32, sp.shape, Bytes(&v[sp.offset], n * 4)});
  }
  opt.push_back({"step", DType::kI32, {1}, Bytes(h.step.data(), 4)});
  RETURN_IF_ERROR(models::WriteSafetensors(dir + "/model.safetensors", model, {{"format", "pt"}}));
  RETURN_IF_ERROR(models::WriteSafetensors(dir + "/optimizer.safetensors", opt,
                                           {{"format", "tandem-dflash-optimizer"}}));
  return models::WriteFileAtomically(dir + "/trainer_state.json",
                                     "{\"format\": \"tandem-dflash-trainer\", \"version\": 1, "
                                     "\"step\": 1, \"seed\": 0}\n");
}

double Seconds(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

struct Series {
  std::vector<double> gbs;
  double best() const { return *std::max_element(gbs.begin(), gbs.end()); }
  double mean() const {
    double s = 0;
    for (double g : gbs) s += g;
    return s / static_cast<double>(gbs.size());
  }
};

// The writer's CPU work alone (file_set_writer.cc's staging: copy into a 16 MiB buffer in
// 1 MiB blocks, XXH3-64 of each block), over the whole state: GB/s. When this is not well
// above the disk's bandwidth, the write is CPU-bound on this host.
double StagingRate(const models::DFlashHostState& h) {
  std::vector<std::byte> buf(size_t{16} << 20);
  models::Xxh3Stream hash;
  const auto t0 = std::chrono::steady_clock::now();
  uint64_t bytes = 0;
  for (const kernels::Tensor* t : {&h.weights, &h.master, &h.adam_m, &h.adam_v}) {
    const auto* p = static_cast<const std::byte*>(t->data());
    const size_t n = static_cast<size_t>(t->nbytes());
    for (size_t at = 0; at < n; at += size_t{1} << 20) {
      const size_t len = std::min(n - at, size_t{1} << 20);
      std::byte* dst = buf.data() + (at % buf.size());
      std::memcpy(dst, p + at, len);
      hash.Update({dst, len});
    }
    bytes += n;
  }
  const double s = Seconds(t0);
  return hash.Digest() == 0 ? 0.0 : bytes / s / 1e9;  // (keeps the hash from being dropped)
}

bool DirectSupported(const std::string& dir) {
  const std::string probe = dir + "/.direct-probe";
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_DIRECT, 0644);
  if (fd >= 0) ::close(fd);
  ::unlink(probe.c_str());
  return fd >= 0;
}

// dd of `bytes` (rounded up to 16 MiB blocks) into DIR; GB/s, or 0 when dd failed.
double RunDd(const std::string& dir, uint64_t bytes) {
  const uint64_t blocks = (bytes + (16u << 20) - 1) / (16u << 20);
  const std::string file = dir + "/dd.bin";
  const std::string cmd = fmt::format("dd if=/dev/zero of='{}' bs=16M count={} oflag=direct "
                                      "conv=fsync status=none", file, blocks);
  const auto t0 = std::chrono::steady_clock::now();
  const int rc = std::system(cmd.c_str());
  const double s = Seconds(t0);
  fs::remove(file);
  return rc == 0 ? blocks * (16.0 * (1 << 20)) / s / 1e9 : 0.0;
}

int Run(const std::vector<std::string>& argv) {
  Args a;
  if (!ParseArgs(argv, &a)) return 2;
  fs::create_directories(a.dir);
  const models::DFlashConfig config = Drafter8b(a.layers);
  const models::DFlashParamLayout layout = models::MakeDFlashParamLayout(config);
  auto host = models::DFlashHostState::Allocate(layout, kernels::HostAllocator());
  if (!host.ok()) {
    std::fprintf(stderr, "checkpoint: %s\n", host.status().ToString().c_str());
    return 1;
  }
  FillRandom(host->weights, 1);
  FillRandom(host->master, 2);
  FillRandom(host->adam_m, 3);
  FillRandom(host->adam_v, 4);
  *static_cast<int32_t*>(host->step.data()) = 1;
  const uint64_t bytes = static_cast<uint64_t>(models::DFlashHostState::Bytes(layout));
  std::printf("checkpoint write: 8B-shaped drafter, %d layer(s), %.1f M params, %.2f GB, "
              "dir %s (O_DIRECT %s)\n", a.layers, layout.total / 1e6, bytes / 1e9,
              a.dir.c_str(), DirectSupported(a.dir) ? "supported" : "not supported");
  std::printf("  staging alone (copy + XXH3-64 on one thread): %.2f GB/s\n", StagingRate(*host));
  dflash::ResumeState state;
  state.identity = dflash::RunIdentity{0, "bench", {1, 9, 17, 25, 33}, 1, 8192, "bench"};
  Series dd, before, after;
  int64_t step = 0;
  for (int r = 0; r < a.reps; ++r) {
    dd.gbs.push_back(RunDd(a.dir, bytes));
    for (bool parallel : {false, true}) {
      if (!parallel && !a.before) continue;
      state.step = ++step;
      state.path = fmt::format("{}/{}", a.dir, dflash::StepDirName(step));
      fs::remove_all(state.path);
      const auto t0 = std::chrono::steady_clock::now();
      Status s = Status::Ok();
      if (parallel) {
        auto files = models::WriteDFlashCheckpoint(state.path, config, layout, *host,
                                                   {step, 0}, a.io);
        std::map<std::string, dflash::FileDigest> digests;
        if (files.ok()) {
          for (const models::WrittenFile& f : *files)
            digests[fs::path(f.path).filename().string()] = {f.bytes, f.xxh3};
          s = dflash::CommitState(a.dir, state, digests);
        } else {
          s = files.status();
        }
      } else {
        s = WriteBefore(state.path, config, layout, *host);
        if (s.ok()) s = dflash::CommitState(a.dir, state);
      }
      const double secs = Seconds(t0);
      if (!s.ok()) {
        std::fprintf(stderr, "checkpoint: %s\n", s.ToString().c_str());
        return 1;
      }
      (parallel ? after : before).gbs.push_back(bytes / secs / 1e9);
      std::printf("  rep %d %-6s %6.2f s  %5.2f GB/s\n", r, parallel ? "after" : "before",
                  secs, bytes / secs / 1e9);
      fs::remove_all(state.path);
    }
  }
  fs::remove(a.dir + "/latest");
  std::printf("  %-60s best %5.2f GB/s  mean %5.2f GB/s\n",
              "dd bs=16M oflag=direct conv=fsync", dd.best(), dd.mean());
  if (a.before)
    std::printf("  %-60s best %5.2f GB/s  mean %5.2f GB/s\n",
                "before: files in turn, buffered, re-read for digests", before.best(),
                before.mean());
  const std::string after_name =
      fmt::format("after: WriteFileSet, {} I/O threads, {} MiB chunks, {}", a.io.io_threads,
                  a.io.chunk_bytes >> 20, a.io.direct ? "O_DIRECT" : "buffered");
  std::printf("  %-60s best %5.2f GB/s  mean %5.2f GB/s\n", after_name.c_str(), after.best(),
              after.mean());
  if (a.before)
    std::printf("  ratio (means): after/dd %.2f  before/dd %.2f  after/before %.2f\n",
                after.mean() / dd.mean(), before.mean() / dd.mean(),
                after.mean() / before.mean());
  else
    std::printf("  ratio (means): after/dd %.2f\n", after.mean() / dd.mean());
  return 0;
}

}  // namespace

TANDEM_BENCH("checkpoint", "write",
             "drafter checkpoint write bandwidth, before/after the parallel writer, vs dd "
             "(--dir= --layers= --reps= --threads= --chunk-mib= --buffered --after-only)",
             Run);

}  // namespace tandem::bench
