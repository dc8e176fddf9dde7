// DFlash checkpoints: see dflash_checkpoint.h.
#include "models/dflash/dflash_checkpoint.h"

#include <cstddef>
#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>
#include <vector>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "models/io/file_util.h"
#include "models/io/safetensors.h"
#include "models/io/safetensors_writer.h"

namespace tandem::models {
namespace {

using kernels::DType;

std::span<const std::byte> Bytes(const void* p, int64_t n) {
  return {static_cast<const std::byte*>(p), static_cast<size_t>(n)};
}

// Reads tensor `name` (shape `shape`) as f32 into dst.
Status ReadInto(const SafetensorsReader& r, const std::string& name,
                const std::vector<int64_t>& shape, float* dst) {
  ASSIGN_OR_RETURN(const TensorInfo* t, r.Get(name));
  if (t->shape != shape)
    return DataLossError("{}: shape [{}] does not match the drafter's [{}]", r.Where(*t),
                         fmt::join(t->shape, ", "), fmt::join(shape, ", "));
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return r.Read(*t, DType::kF32, dst, n * 4);
}

}  // namespace

int64_t DFlashHostState::Bytes(const DFlashParamLayout& layout) {
  return layout.total * (2 + 3 * 4) + 4;
}

Result<DFlashHostState> DFlashHostState::Allocate(const DFlashParamLayout& layout,
                                                  kernels::Allocator& alloc) {
  const int64_t n = layout.total;
  DFlashHostState h;
  ASSIGN_OR_RETURN(h.weights, kernels::Tensor::Empty(alloc, DType::kBF16, {n}));
  ASSIGN_OR_RETURN(h.master, kernels::Tensor::Empty(alloc, DType::kF32, {n}));
  ASSIGN_OR_RETURN(h.adam_m, kernels::Tensor::Empty(alloc, DType::kF32, {n}));
  ASSIGN_OR_RETURN(h.adam_v, kernels::Tensor::Empty(alloc, DType::kF32, {n}));
  ASSIGN_OR_RETURN(h.step, kernels::Tensor::Empty(alloc, DType::kI32, {1}));
  return h;
}

Status CopyDFlashState(DFlashDrafter& drafter, DFlashHostState& host, kernels::Stream stream) {
  const DFlashParams& p = drafter.params();
  RETURN_IF_ERROR(kernels::CopyToHost(host.weights.data(), p.compute, stream));
  RETURN_IF_ERROR(kernels::CopyToHost(host.master.data(), p.master, stream));
  RETURN_IF_ERROR(kernels::CopyToHost(host.adam_m.data(), p.adam_m, stream));
  RETURN_IF_ERROR(kernels::CopyToHost(host.adam_v.data(), p.adam_v, stream));
  return kernels::CopyToHost(host.step.data(), p.step, stream);
}

Result<std::vector<WrittenFile>> WriteDFlashCheckpoint(
    const std::string& dir, const DFlashConfig& config, const DFlashParamLayout& layout,
    const DFlashHostState& host, const DFlashTrainerState& state,
    const FileSetWriteOptions& io) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return InvalidArgumentError("cannot create checkpoint dir {}: {}", dir, ec.message());
  const auto* weights = host.weights.view().data_as<kernels::bf16>();
  const auto* master = host.master.view().data_as<float>();
  const auto* m = host.adam_m.view().data_as<float>();
  const auto* v = host.adam_v.view().data_as<float>();
  std::vector<TensorToWrite> model, opt;
  for (const DFlashParamSpec& sp : layout.specs) {
    const int64_t n = sp.numel();
    model.push_back({sp.name, DType::kBF16, sp.shape, Bytes(&weights[sp.offset], n * 2)});
    opt.push_back({"master." + sp.name, DType::kF32, sp.shape, Bytes(&master[sp.offset], n * 4)});
    opt.push_back({"exp_avg." + sp.name, DType::kF32, sp.shape, Bytes(&m[sp.offset], n * 4)});
    opt.push_back({"exp_avg_sq." + sp.name, DType::kF32, sp.shape, Bytes(&v[sp.offset], n * 4)});
  }
  opt.push_back({"step", DType::kI32, {1}, Bytes(host.step.data(), 4)});
  ASSIGN_OR_RETURN(SafetensorsBytes model_bytes,
                   SerializeSafetensors(dir + "/model.safetensors", model, {{"format", "pt"}}));
  ASSIGN_OR_RETURN(SafetensorsBytes opt_bytes,
                   SerializeSafetensors(dir + "/optimizer.safetensors", opt,
                                        {{"format", "tandem-dflash-optimizer"}}));
  const std::string config_text = DFlashConfigToJson(config).dump(2) + "\n";
  const std::string state_text = DFlashTrainerStateText(state);
  auto text = [](const std::string& s) { return Bytes(s.data(), static_cast<int64_t>(s.size())); };
  std::vector<FileToWrite> files(4);
  files[0] = {dir + "/config.json", {text(config_text)}};
  files[1] = {dir + "/model.safetensors", {text(model_bytes.header)}};
  files[1].parts.insert(files[1].parts.end(), model_bytes.data.begin(), model_bytes.data.end());
  files[2] = {dir + "/optimizer.safetensors", {text(opt_bytes.header)}};
  files[2].parts.insert(files[2].parts.end(), opt_bytes.data.begin(), opt_bytes.data.end());
  files[3] = {dir + "/trainer_state.json", {text(state_text)}};
  return WriteFileSet(files, io);
}

Result<std::vector<WrittenFile>> SaveDFlashCheckpoint(const std::string& dir,
                                                      DFlashDrafter& drafter,
                                                      const DFlashTrainerState& state,
                                                      const FileSetWriteOptions& io) {
  const DFlashParams& p = drafter.params();
  ASSIGN_OR_RETURN(DFlashHostState host,
                   DFlashHostState::Allocate(p.layout, kernels::HostAllocator()));
  RETURN_IF_ERROR(CopyDFlashState(drafter, host, drafter.stream()));
  RETURN_IF_ERROR(kernels::SynchronizeStream(drafter.device(), drafter.stream()));
  return WriteDFlashCheckpoint(dir, drafter.config(), p.layout, host, state, io);
}

Status LoadDFlashWeights(const std::string& dir, DFlashDrafter& drafter) {
  ASSIGN_OR_RETURN(SafetensorsReader r, SafetensorsReader::Open(dir + "/model.safetensors"));
  DFlashParams& p = drafter.params();
  kernels::Stream s = drafter.stream();
  std::vector<float> master(p.layout.total, 0.0f);
  for (const DFlashParamSpec& sp : p.layout.specs)
    RETURN_IF_ERROR(ReadInto(r, sp.name, sp.shape, &master[sp.offset]));
  RETURN_IF_ERROR(kernels::CopyFromHost(p.master, master.data(), s));
  for (kernels::TensorView t : {p.adam_m.view(), p.adam_v.view(), p.grads.view(), p.step.view()})
    RETURN_IF_ERROR(kernels::FillZero(t, s));
  return p.SyncCompute(s);
}

Status LoadDFlashCheckpoint(const std::string& dir, DFlashDrafter& drafter,
                            DFlashTrainerState* state) {
  const std::string state_path = dir + "/trainer_state.json";
  std::ifstream f(state_path);
  if (!f) return NotFoundError("{}: missing (not a tandem training checkpoint?)", state_path);
  std::stringstream text;
  text << f.rdbuf();
  ASSIGN_OR_RETURN(DFlashTrainerState parsed, ParseDFlashTrainerState(text.str(), state_path));
  RETURN_IF_ERROR(LoadDFlashWeights(dir, drafter));
  ASSIGN_OR_RETURN(SafetensorsReader r, SafetensorsReader::Open(dir + "/optimizer.safetensors"));
  DFlashParams& p = drafter.params();
  kernels::Stream s = drafter.stream();
  std::vector<float> master(p.layout.total, 0.0f), m(p.layout.total, 0.0f),
      v(p.layout.total, 0.0f);
  for (const DFlashParamSpec& sp : p.layout.specs) {
    RETURN_IF_ERROR(ReadInto(r, "master." + sp.name, sp.shape, &master[sp.offset]));
    RETURN_IF_ERROR(ReadInto(r, "exp_avg." + sp.name, sp.shape, &m[sp.offset]));
    RETURN_IF_ERROR(ReadInto(r, "exp_avg_sq." + sp.name, sp.shape, &v[sp.offset]));
  }
  int32_t step = 0;
  ASSIGN_OR_RETURN(const TensorInfo* st, r.Get("step"));
  RETURN_IF_ERROR(r.Read(*st, DType::kI32, &step, 4));
  RETURN_IF_ERROR(kernels::CopyFromHost(p.master, master.data(), s));
  RETURN_IF_ERROR(kernels::CopyFromHost(p.adam_m, m.data(), s));
  RETURN_IF_ERROR(kernels::CopyFromHost(p.adam_v, v.data(), s));
  RETURN_IF_ERROR(kernels::CopyFromHost(p.step, &step, s));
  RETURN_IF_ERROR(p.SyncCompute(s));
  // AdamW steps on the device: at most the steps issued (a non-finite step is skipped there).
  if (step < 0 || step > parsed.step)
    return DataLossError("{}: {} AdamW steps, but {} says {} steps were issued", r.Where(*st),
                         step, state_path, parsed.step);
  *state = parsed;
  return Status::Ok();
}

}  // namespace tandem::models
