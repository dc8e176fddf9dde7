// `tandem-bench fidelity --model=DIR --out=FILE`: the captures and logits of tandem's bf16 and
// fp8 targets on the golden batch of a Qwen3-8B-shaped checkpoint, for
// tests/golden/fp8_fidelity.py to compare (with transformers' bf16 forward) against the fp32
// reference. DIR is what tests/golden/make_qwen3_8b_shaped.py writes: the checkpoint and
// golden_hidden.safetensors (input_ids, position_ids, cu_seqlens, hidden.{i}).
//
// For each precision the target is loaded from DIR (fp8: projections quantized layer by
// layer as they are read), the golden batch runs once capturing every hidden.{i} layer the
// golden file holds, with fp32 logits; FILE gets
//   tandem_{bf16,fp8}.hidden.{i}   BF16 [T, H]
//   tandem_{bf16,fp8}.logits_tail  F32  [8 * docs, V]  last 8 rows of each document
// and stdout one line per precision: load time, weights, and the pool's peak bytes in use
// during the load (the bf16 and e4m3 copies of the projections never coexist in full).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench.h"

#ifdef TANDEM_HAVE_CUDA
#include "kernels/core/device_pools.h"
#include "kernels/core/memory.h"
#include "kernels/core/stream.h"
#include "models/io/safetensors.h"
#include "models/io/safetensors_writer.h"
#include "models/qwen3/qwen3_target.h"
#endif

namespace tandem::bench {
namespace {

#ifdef TANDEM_HAVE_CUDA
using kernels::DType;
using kernels::Tensor;

constexpr int64_t kTailRows = 8;  // as make_qwen3_8b_shaped.py's logits_tail

template <typename T>
Result<std::vector<T>> ReadAll(const models::SafetensorsReader& r, const std::string& name,
                               DType dtype) {
  ASSIGN_OR_RETURN(const models::TensorInfo* t, r.Get(name));
  std::vector<T> v(static_cast<size_t>(t->numel()));
  RETURN_IF_ERROR(r.Read(*t, dtype, v.data(), t->numel() * static_cast<int64_t>(sizeof(T))));
  return v;
}

struct GoldenBatch {
  std::vector<int32_t> ids, pos, cu;
  std::vector<int> layers;
  int max_seqlen = 0;
};

Result<GoldenBatch> ReadBatch(const std::string& path) {
  ASSIGN_OR_RETURN(models::SafetensorsReader r, models::SafetensorsReader::Open(path));
  GoldenBatch b;
  ASSIGN_OR_RETURN(b.ids, ReadAll<int32_t>(r, "input_ids", DType::kI32));
  ASSIGN_OR_RETURN(b.pos, ReadAll<int32_t>(r, "position_ids", DType::kI32));
  ASSIGN_OR_RETURN(b.cu, ReadAll<int32_t>(r, "cu_seqlens", DType::kI32));
  for (int l = 0; l < 1024; ++l)
    if (r.Find("hidden." + std::to_string(l)) != nullptr) b.layers.push_back(l);
  if (b.layers.empty()) return NotFoundError("{}: no hidden.{{i}} tensors", path);
  for (size_t d = 0; d + 1 < b.cu.size(); ++d) {
    if (b.cu[d + 1] - b.cu[d] < kTailRows)
      return InvalidArgumentError("{}: document {} is shorter than {} tokens", path, d, kTailRows);
    b.max_seqlen = std::max(b.max_seqlen, b.cu[d + 1] - b.cu[d]);
  }
  return b;
}

// Host copies of one precision's outputs, named for the output file.
struct Outputs {
  std::vector<std::string> names;
  std::vector<std::vector<std::byte>> bytes;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<DType> dtypes;
};

Status RunPrecision(const std::string& dir, const GoldenBatch& b, models::TargetPrecision p,
                    const kernels::CudaStream& stream, Outputs* out) {
  kernels::DevicePools pools;  // this run's own: everything goes back to CUDA at return
  ASSIGN_OR_RETURN(kernels::CachingPool * pool, pools.Pool(0));
  pool->ResetHighWater();
  const int64_t t = static_cast<int64_t>(b.ids.size());
  const auto t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(std::unique_ptr<models::Qwen3Target> target,
                   models::Qwen3Target::Load(dir, *pool,
                                             {.max_tokens = t, .stream = stream.get(),
                                              .precision = p}));
  const double load_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const int64_t load_peak = pool->stats().high_water_in_use;
  const models::TransformerConfig& c = target->config();
  auto upload = [&](const std::vector<int32_t>& h) -> Result<Tensor> {
    ASSIGN_OR_RETURN(Tensor x, Tensor::Empty(*pool, DType::kI32,
                                             {static_cast<int64_t>(h.size())}, stream.get()));
    RETURN_IF_ERROR(kernels::CopyFromHost(x, h.data(), stream.get()));
    return x;
  };
  ASSIGN_OR_RETURN(Tensor ids, upload(b.ids));
  ASSIGN_OR_RETURN(Tensor pos, upload(b.pos));
  ASSIGN_OR_RETURN(Tensor cu, upload(b.cu));
  std::vector<Tensor> bufs;
  std::vector<models::LayerCapture> caps;
  for (int l : b.layers) {
    ASSIGN_OR_RETURN(Tensor x, Tensor::Empty(*pool, DType::kBF16, {t, c.hidden_size},
                                             stream.get()));
    bufs.push_back(std::move(x));
    caps.push_back({l, bufs.back().view()});
  }
  ASSIGN_OR_RETURN(Tensor logits, Tensor::Empty(*pool, DType::kF32, {t, c.vocab_size},
                                                stream.get()));
  RETURN_IF_ERROR(target->Forward({ids, pos, cu, b.max_seqlen}, caps, logits));
  RETURN_IF_ERROR(stream.Synchronize());
  const std::string prefix = "tandem_" + std::string(models::TargetPrecisionName(p)) + ".";
  for (size_t i = 0; i < bufs.size(); ++i) {
    out->names.push_back(prefix + "hidden." + std::to_string(b.layers[i]));
    out->bytes.emplace_back(static_cast<size_t>(bufs[i].view().nbytes()));
    RETURN_IF_ERROR(kernels::CopyToHost(out->bytes.back().data(), bufs[i].view(), stream.get()));
    out->shapes.push_back({t, c.hidden_size});
    out->dtypes.push_back(DType::kBF16);
  }
  const int64_t docs = static_cast<int64_t>(b.cu.size()) - 1;
  std::vector<std::byte> tail(static_cast<size_t>(docs * kTailRows * c.vocab_size * 4));
  for (int64_t d = 0; d < docs; ++d)
    RETURN_IF_ERROR(kernels::CopyToHost(tail.data() + d * kTailRows * c.vocab_size * 4,
                                        logits.view().Narrow(0, b.cu[d + 1] - kTailRows, kTailRows),
                                        stream.get()));
  RETURN_IF_ERROR(stream.Synchronize());
  out->names.push_back(prefix + "logits_tail");
  out->bytes.push_back(std::move(tail));
  out->shapes.push_back({docs * kTailRows, c.vocab_size});
  out->dtypes.push_back(DType::kF32);
  const double gib = 1024.0 * 1024 * 1024;
  std::printf("tandem %-4s load %.1f s, weights %.2f GiB, pool peak in use during load %.2f GiB"
              ", after the forward %.2f GiB\n",
              std::string(models::TargetPrecisionName(p)).c_str(), load_s,
              target->weight_bytes() / gib, load_peak / gib,
              pool->stats().high_water_in_use / gib);
  std::fflush(stdout);
  return Status::Ok();
}

int FidelityBench(const std::vector<std::string>& args) {
  std::string dir, out_path;
  for (const std::string& a : args) {
    if (a.rfind("--model=", 0) == 0) dir = a.substr(8);
    else if (a.rfind("--out=", 0) == 0) out_path = a.substr(6);
    else {
      std::fprintf(stderr, "fidelity bench: unknown argument %s\n", a.c_str());
      return 2;
    }
  }
  if (dir.empty() || out_path.empty()) {
    std::fprintf(stderr, "fidelity bench: needs --model=DIR (make_qwen3_8b_shaped.py) and "
                         "--out=FILE\n");
    return 2;
  }
  if (kernels::CudaDeviceCount() == 0) {
    std::printf("fidelity: skipped (no CUDA device visible)\n");
    return 0;
  }
  auto run = [&]() -> Status {
    ASSIGN_OR_RETURN(GoldenBatch b, ReadBatch(dir + "/golden_hidden.safetensors"));
    ASSIGN_OR_RETURN(kernels::CudaStream stream, kernels::CudaStream::Create(0));
    Outputs o;
    for (models::TargetPrecision p : {models::TargetPrecision::kBf16, models::TargetPrecision::kFp8})
      RETURN_IF_ERROR(RunPrecision(dir, b, p, stream, &o));
    std::vector<models::TensorToWrite> w;
    for (size_t i = 0; i < o.names.size(); ++i)
      w.push_back({o.names[i], o.dtypes[i], o.shapes[i], o.bytes[i]});
    return models::WriteSafetensors(out_path, w, {{"generator", "tandem-bench fidelity"}});
  };
  if (Status s = run(); !s.ok()) {
    std::fprintf(stderr, "fidelity bench: %s\n", s.ToString().c_str());
    return 1;
  }
  std::printf("wrote %s\n", out_path.c_str());
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
             "--model=DIR --out=FILE: tandem bf16/fp8 captures on the 8B-shaped golden batch",
             FidelityBench);

}  // namespace tandem::bench
