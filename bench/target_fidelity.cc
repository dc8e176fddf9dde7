// `tandem-bench fidelity --model=DIR [--golden=FILE] --out=FILE`: the captures and tail logits
// of tandem's bf16 and fp8 targets on a golden batch, for tests/golden/target_fidelity.py (or
// fp8_fidelity.py) to compare, with transformers' bf16 forward, against the fp32 reference.
//
// DIR is any target checkpoint the loader accepts, its family picked by config.json's
// `model_type`: dense Qwen3 / Llama-3 (models/qwen3) or the Qwen3.5 / Qwen3.6 hybrid, dense
// or MoE (models/qwen3_5). FILE (default DIR/golden_hidden.safetensors) is read and checked
// against DIR's config first (bench/fidelity_golden.h): a golden made for another model is
// refused before anything is loaded. Everything runs on the GPU.
//
// For each precision the target is loaded from DIR (fp8: projections quantized layer by layer
// as they are read) and the golden batch runs once, packed as DFlash runs it, capturing every
// hidden.{i} the golden holds. The tail logits (f32) come from the dense forward's LM head;
// for the hybrid, whose packed forward stops at the last captured layer, from a prefill of
// each document alone through the decode path (Extend on an empty cache), which runs every
// layer, the final norm and the LM head. --out gets
//   tandem_{bf16,fp8}.hidden.{i}   BF16 [T, H]
//   tandem_{bf16,fp8}.logits_tail  F32  [8 * docs, V]  last 8 rows of each document
// and stdout one line per precision: load time, weights, and the pool's peak bytes in use. A
// checkpoint the fp8 path refuses (InvalidArgument, e.g. widths FP8 GEMMs cannot take) gets
// its bf16 outputs only, and the refusal is printed.
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "bench/bench.h"
#include "bench/fidelity_golden.h"

#ifdef TANDEM_HAVE_CUDA
#include "kernels/core/device_pools.h"
#include "kernels/core/memory.h"
#include "kernels/core/stream.h"
#include "models/io/hf_config.h"
#include "models/io/safetensors_writer.h"
#include "models/qwen3/qwen3_target.h"
#include "models/qwen3_5/qwen3_5_cache.h"
#include "models/qwen3_5/qwen3_5_config.h"
#include "models/qwen3_5/qwen3_5_target.h"
#include "runtime/core/json_parse.h"
#endif

namespace tandem::bench {
namespace {

#ifdef TANDEM_HAVE_CUDA
using kernels::DType;
using kernels::Tensor;
using kernels::TensorView;

enum class Family { kDense, kHybrid };

// Host copies of the outputs, named for the output file.
struct Outputs {
  std::vector<std::string> names;
  std::vector<std::vector<std::byte>> bytes;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<DType> dtypes;

  Status Add(const std::string& name, TensorView v, kernels::Stream stream) {
    names.push_back(name);
    bytes.emplace_back(static_cast<size_t>(v.nbytes()));
    RETURN_IF_ERROR(kernels::CopyToHost(bytes.back().data(), v, stream));
    std::vector<int64_t> dims;
    for (int d = 0; d < v.ndim(); ++d) dims.push_back(v.shape()[d]);
    shapes.push_back(std::move(dims));
    dtypes.push_back(v.dtype());
    return Status::Ok();
  }
};

// The family of DIR (config.json's model_type) and the shape the golden must fit.
Result<Family> ReadFamily(const std::string& dir, FidelityModelShape* shape) {
  const std::string path = dir + "/config.json";
  ASSIGN_OR_RETURN(nlohmann::json j, ReadJsonFile(path, path, size_t{64} << 20));
  const std::string type = j.is_object() && j.contains("model_type") &&
                                   j["model_type"].is_string()
                               ? j["model_type"].get<std::string>() : "";
  shape->source = path;
  if (type.starts_with("qwen3_5")) {  // the hybrid, dense or MoE (qwen3_5_moe*)
    ASSIGN_OR_RETURN(models::Qwen35Config c, models::LoadQwen35Config(path));
    *shape = {path, c.hidden_size, c.vocab_size, c.num_hidden_layers};
    return Family::kHybrid;
  }
  // Everything else goes to the dense parser, which names what it refuses (model_type
  // included), so an unsupported family is an error here, not a silent dense run.
  ASSIGN_OR_RETURN(models::TransformerConfig c, models::LoadTransformerConfig(path));
  *shape = {path, c.hidden_size, c.vocab_size, c.num_hidden_layers};
  return Family::kDense;
}

Result<Tensor> Upload(kernels::Allocator& pool, const std::vector<int32_t>& h,
                      kernels::Stream s) {
  ASSIGN_OR_RETURN(Tensor x, Tensor::Empty(pool, DType::kI32, {static_cast<int64_t>(h.size())},
                                           s));
  RETURN_IF_ERROR(kernels::CopyFromHost(x, h.data(), s));
  return x;
}

// The golden's packed batch on the device and one bf16 [T, H] buffer per captured layer.
struct DeviceBatch {
  Tensor ids, pos, cu;
  std::vector<Tensor> captures;
};

Result<DeviceBatch> UploadBatch(const FidelityGolden& g, kernels::Allocator& pool,
                                kernels::Stream s) {
  DeviceBatch b;
  ASSIGN_OR_RETURN(b.ids, Upload(pool, g.ids, s));
  ASSIGN_OR_RETURN(b.pos, Upload(pool, g.pos, s));
  ASSIGN_OR_RETURN(b.cu, Upload(pool, g.cu, s));
  for (size_t i = 0; i < g.layers.size(); ++i) {
    ASSIGN_OR_RETURN(Tensor x, Tensor::Empty(pool, DType::kBF16, {g.tokens(), g.hidden_size}, s));
    b.captures.push_back(std::move(x));
  }
  return b;
}

// The last kFidelityTailRows rows of every document of f32 `logits` [T, V] (on the device)
// into one host tensor.
Status AddTail(const FidelityGolden& g, TensorView logits, const std::string& name,
               kernels::Stream s, Outputs* out) {
  const int64_t v = logits.shape()[1];
  std::vector<std::byte> tail(static_cast<size_t>(g.documents() * kFidelityTailRows * v * 4));
  for (int64_t d = 0; d < g.documents(); ++d)
    RETURN_IF_ERROR(kernels::CopyToHost(
        tail.data() + d * kFidelityTailRows * v * 4,
        logits.Narrow(0, g.cu[d + 1] - kFidelityTailRows, kFidelityTailRows), s));
  out->names.push_back(name);
  out->bytes.push_back(std::move(tail));
  out->shapes.push_back({g.documents() * kFidelityTailRows, v});
  out->dtypes.push_back(DType::kF32);
  return Status::Ok();
}

// Loads, runs and reads back one precision of a dense target. Returns the weight bytes.
Result<int64_t> RunDense(const std::string& dir, const FidelityGolden& g,
                         models::TargetPrecision p, kernels::CachingPool& pool,
                         const kernels::CudaStream& stream, const std::string& prefix,
                         Outputs* out) {
  const kernels::Stream s = stream.get();
  ASSIGN_OR_RETURN(std::unique_ptr<models::Qwen3Target> target,
                   models::Qwen3Target::Load(dir, pool,
                                             {.max_tokens = g.tokens(), .stream = s,
                                              .precision = p}));
  ASSIGN_OR_RETURN(DeviceBatch b, UploadBatch(g, pool, s));
  std::vector<models::LayerCapture> caps;
  for (size_t i = 0; i < g.layers.size(); ++i) caps.push_back({g.layers[i], b.captures[i].view()});
  ASSIGN_OR_RETURN(Tensor logits, Tensor::Empty(pool, DType::kF32,
                                                {g.tokens(), target->config().vocab_size}, s));
  RETURN_IF_ERROR(target->Forward({b.ids, b.pos, b.cu, g.max_seqlen}, caps, logits));
  for (size_t i = 0; i < g.layers.size(); ++i)
    RETURN_IF_ERROR(out->Add(prefix + "hidden." + std::to_string(g.layers[i]),
                             b.captures[i].view(), s));
  RETURN_IF_ERROR(AddTail(g, logits.view(), prefix + "logits_tail", s, out));
  RETURN_IF_ERROR(stream.Synchronize());
  return target->weight_bytes();
}

// The same for a hybrid target.
Result<int64_t> RunHybrid(const std::string& dir, const FidelityGolden& g,
                          models::TargetPrecision p, kernels::CachingPool& pool,
                          const kernels::CudaStream& stream, const std::string& prefix,
                          Outputs* out) {
  const kernels::Stream s = stream.get();
  ASSIGN_OR_RETURN(std::unique_ptr<models::Qwen35Target> target,
                   models::Qwen35Target::Load(dir, pool,
                                              {.max_tokens = g.tokens(), .stream = s,
                                               .precision = p}));
  ASSIGN_OR_RETURN(DeviceBatch b, UploadBatch(g, pool, s));
  std::vector<models::HybridCapture> caps;
  for (size_t i = 0; i < g.layers.size(); ++i) caps.push_back({g.layers[i], b.captures[i].view()});
  RETURN_IF_ERROR(target->Forward({b.ids, b.pos, b.cu, g.max_seqlen}, caps));
  for (size_t i = 0; i < g.layers.size(); ++i)
    RETURN_IF_ERROR(out->Add(prefix + "hidden." + std::to_string(g.layers[i]),
                             b.captures[i].view(), s));
  ASSIGN_OR_RETURN(Tensor logits, Tensor::Empty(pool, DType::kF32,
                                                {g.tokens(), target->config().vocab_size}, s));
  for (int64_t d = 0; d < g.documents(); ++d) {
    const int64_t len = int64_t{g.cu[d + 1]} - g.cu[d];
    ASSIGN_OR_RETURN(models::Qwen35Cache cache,
                     models::Qwen35Cache::Create(target->config(), len, 1, pool, s));
    const std::span<const int32_t> doc(g.ids.data() + g.cu[d], static_cast<size_t>(len));
    RETURN_IF_ERROR(target->Extend(cache, doc, {}, logits.view().Narrow(0, g.cu[d], len)));
    RETURN_IF_ERROR(stream.Synchronize());  // the cache is freed at scope end
  }
  RETURN_IF_ERROR(AddTail(g, logits.view(), prefix + "logits_tail", s, out));
  RETURN_IF_ERROR(stream.Synchronize());
  return target->weights().nbytes() + target->fp8_projections().nbytes();
}

Status RunPrecision(const std::string& dir, Family family, const FidelityGolden& g,
                    models::TargetPrecision p, const kernels::CudaStream& stream, Outputs* out) {
  kernels::DevicePools pools;  // this run's own: everything goes back to CUDA at return
  ASSIGN_OR_RETURN(kernels::CachingPool * pool, pools.Pool(0));
  pool->ResetHighWater();
  const std::string name(models::TargetPrecisionName(p));
  const std::string prefix = "tandem_" + name + ".";
  const auto t0 = std::chrono::steady_clock::now();
  Result<int64_t> weights = family == Family::kDense
                                ? RunDense(dir, g, p, *pool, stream, prefix, out)
                                : RunHybrid(dir, g, p, *pool, stream, prefix, out);
  if (!weights.ok()) return weights.status().WithContext("tandem " + name);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double gib = 1024.0 * 1024 * 1024;
  std::printf("tandem %-4s load + forward %.1f s, weights %.2f GiB, pool peak in use %.2f GiB\n",
              name.c_str(), s, *weights / gib, pool->stats().high_water_in_use / gib);
  std::fflush(stdout);
  return Status::Ok();
}

struct Args {
  std::string dir, golden, out;
};

int FidelityBench(const std::vector<std::string>& argv) {
  Args a;
  for (const std::string& s : argv) {
    if (s.rfind("--model=", 0) == 0) a.dir = s.substr(8);
    else if (s.rfind("--golden=", 0) == 0) a.golden = s.substr(9);
    else if (s.rfind("--out=", 0) == 0) a.out = s.substr(6);
    else {
      std::fprintf(stderr, "fidelity bench: unknown argument %s\n", s.c_str());
      return 2;
    }
  }
  if (a.dir.empty() || a.out.empty()) {
    std::fprintf(stderr, "fidelity bench: needs --model=DIR (a target checkpoint), "
                         "[--golden=FILE] (default DIR/golden_hidden.safetensors) and "
                         "--out=FILE\n");
    return 2;
  }
  if (a.golden.empty()) a.golden = a.dir + "/golden_hidden.safetensors";
  auto run = [&]() -> Status {
    FidelityModelShape shape;
    ASSIGN_OR_RETURN(Family family, ReadFamily(a.dir, &shape));
    ASSIGN_OR_RETURN(FidelityGolden g, ReadFidelityGolden(a.golden));
    RETURN_IF_ERROR(CheckGoldenFitsModel(g, shape));
    if (kernels::CudaDeviceCount() == 0)
      return UnavailableError("no CUDA device visible: the fidelity check runs on the GPU");
    std::printf("fidelity: %s target, %lld tokens in %lld documents, %zu layers\n",
                family == Family::kDense ? "dense" : "hybrid",
                static_cast<long long>(g.tokens()), static_cast<long long>(g.documents()),
                g.layers.size());
    ASSIGN_OR_RETURN(kernels::CudaStream stream, kernels::CudaStream::Create(0));
    Outputs o;
    RETURN_IF_ERROR(RunPrecision(a.dir, family, g, models::TargetPrecision::kBf16, stream, &o));
    // A model the FP8 path refuses (e.g. a projection width that is not a multiple of 16, as
    // in tiny test checkpoints) still gets its bf16 answer; the refusal is printed.
    if (Status st = RunPrecision(a.dir, family, g, models::TargetPrecision::kFp8, stream, &o);
        !st.ok()) {
      if (st.code() != StatusCode::kInvalidArgument) return st;
      std::printf("tandem fp8  skipped: %s\n", st.ToString().c_str());
    }
    std::vector<models::TensorToWrite> w;
    for (size_t i = 0; i < o.names.size(); ++i)
      w.push_back({o.names[i], o.dtypes[i], o.shapes[i], o.bytes[i]});
    return models::WriteSafetensors(a.out, w, {{"generator", "tandem-bench fidelity"}});
  };
  if (Status s = run(); !s.ok()) {
    std::fprintf(stderr, "fidelity bench: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("wrote %s\n", a.out.c_str());
  return 0;
}
#else
int FidelityBench(const std::vector<std::string>&) {
  std::printf("fidelity: skipped (built without CUDA)\n");
  return 0;
}
#endif

}  // namespace

TANDEM_BENCH("fidelity", "target",
             "--model=DIR [--golden=FILE] --out=FILE: tandem bf16/fp8 captures and tail logits "
             "of any target family on a golden batch (tests/golden/target_fidelity.py)",
             FidelityBench);

}  // namespace tandem::bench
