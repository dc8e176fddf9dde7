// GPU tests of the Qwen3 target (label gpu; SKIPPED without a device): the CUDA forward
// against the CPU forward and the float64 reference, against the HF transformers goldens
// (tiny, and the Qwen3-8B-shaped checkpoint when TANDEM_QWEN3_8B_SHAPED_DIR names one), and
// a steady-state Forward that allocates nothing and can be captured in a CUDA graph (which
// fails on any host synchronisation); a Qwen3-MoE fp8 target staged layer by layer on CUDA
// equal bit for bit to quantizing a whole bf16 load.
#include <cuda_runtime_api.h>

#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/core/device_pools.h"
#include "kernels/core/stream.h"
#include "kernels/gemm/fp8.h"
#include "kernels/testing/testing.h"
#include "models/io/model_test_util.h"
#include "models/qwen3/qwen3_fp8.h"
#include "models/qwen3/qwen3_golden_util.h"
#include "models/qwen3/qwen3_target.h"
#include "models/qwen3/qwen3_test_util.h"

namespace tandem::models {
namespace {

using kernels::bf16;
using kernels::Device;
using kernels::DType;
using kernels::Tensor;
using kernels::TensorView;
using kernels::testing::AllClose;
using kernels::testing::MakeTensor;
using kernels::testing::ToHost;
using testing::HostBatch;

// The CPU test's budget (qwen3_test_util.h): the CUDA forward differs from the CPU one only
// in accumulation order and in the attention kernel, both below a bf16 ulp of the inputs.
using testing::kAtol;
using testing::kRtol;
using testing::Rms;

struct DeviceBatch {
  Tensor ids, pos, cu;
  int max_seqlen;
  PackedBatch view() const { return {ids, pos, cu, max_seqlen}; }
};

DeviceBatch Upload(kernels::Allocator& alloc, const HostBatch& b) {
  const int64_t t = static_cast<int64_t>(b.ids.size());
  return {MakeTensor<int32_t>(alloc, DType::kI32, {t}, b.ids),
          MakeTensor<int32_t>(alloc, DType::kI32, {t}, b.pos),
          MakeTensor<int32_t>(alloc, DType::kI32, {static_cast<int64_t>(b.cu.size())}, b.cu),
          b.max_seqlen};
}

std::vector<double> AsDouble(const std::vector<bf16>& v) {
  std::vector<double> out;
  for (bf16 x : v) out.push_back(x.f());
  return out;
}

class Qwen3TargetCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = kernels::CudaStream::Create(0);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    stream_ = std::move(*s);
    pool_ = pools_.Pool(0).value();
  }
  // Runs `target` on `b` capturing all layers; returns the captures and f32 logits on host.
  void Run(Qwen3Target& target, kernels::Allocator& alloc, const HostBatch& b,
           std::vector<std::vector<bf16>>* hidden, std::vector<float>* logits) {
    const TransformerConfig& c = target.config();
    const int64_t t = static_cast<int64_t>(b.ids.size());
    DeviceBatch db = Upload(alloc, b);
    std::vector<Tensor> bufs;
    std::vector<LayerCapture> caps;
    for (int l = 0; l < c.num_hidden_layers; ++l) {
      bufs.push_back(testing::EmptyTensor(alloc, DType::kBF16, {t, c.hidden_size}));
      caps.push_back({l, bufs.back().view()});
    }
    Tensor lg = testing::EmptyTensor(alloc, DType::kF32, {t, c.vocab_size});
    Status st = target.Forward(db.view(), caps, lg);
    ASSERT_TRUE(st.ok()) << st.ToString();
    ASSERT_TRUE(kernels::SynchronizeStream(target.device(), stream_.get()).ok());
    hidden->clear();
    for (const Tensor& x : bufs) hidden->push_back(ToHost<bf16>(x.view()));
    *logits = ToHost<float>(lg.view());
  }

  kernels::DevicePools pools_;  // first: outlives the stream's work and every tensor
  kernels::CudaStream stream_;
  kernels::CachingPool* pool_ = nullptr;
};

// Tiny (head_dim 8), Qwen3-like (head_dim 128, the cuDNN path) and tiny Qwen3-MoE shapes:
// CUDA vs CPU vs the float64 reference, on documents of odd lengths.
TEST_F(Qwen3TargetCudaTest, MatchesCpuForwardAndFloat64Reference) {
  TransformerConfig wide = testing::TinyConfig(false, false);
  wide.hidden_size = 256;
  wide.head_dim = wide.rotary_dim = 128;
  wide.intermediate_size = 384;
  wide.vocab_size = 301;
  const struct {
    TransformerConfig cfg;
    std::vector<int> docs;
  } cases[] = {{testing::TinyConfig(false, false), {5, 11, 1, 7, 33}},
               {wide, {100, 257, 31}},
               {testing::TinyMoeConfig(), {5, 11, 1, 7, 33}}};  // qwen3_moe: 2 MoE layers
  for (const auto& cs : cases) {
    SCOPED_TRACE(cs.cfg.model_type + " head_dim " + std::to_string(cs.cfg.head_dim));
    const testing::HostWeights w = testing::RandomHostWeights(cs.cfg, 21);
    testing::ScratchDir dir;
    ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), cs.cfg, w).ok());
    HostBatch b = testing::MakeBatch(cs.docs, cs.cfg.vocab_size, 9);
    const int64_t t = static_cast<int64_t>(b.ids.size());
    auto gpu = Qwen3Target::Load(dir.path(), *pool_,
                                 {.max_tokens = t + 5, .stream = stream_.get()});
    ASSERT_TRUE(gpu.ok()) << gpu.status().ToString();
    auto cpu = Qwen3Target::Load(dir.path(), kernels::HostAllocator(), {.max_tokens = t});
    ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
    std::vector<std::vector<bf16>> hg, hc;
    std::vector<float> lg, lc;
    Run(**gpu, *pool_, b, &hg, &lg);
    Run(**cpu, kernels::HostAllocator(), b, &hc, &lc);
    const testing::RefOutputs ref = testing::ReferenceForward(cs.cfg, w, b);
    for (size_t l = 0; l < hg.size(); ++l) {
      const std::string name = "hidden." + std::to_string(l);
      const double atol = kAtol * Rms(ref.hidden[l]);
      EXPECT_TRUE(AllClose(AsDouble(hg[l]), AsDouble(hc[l]), atol, kRtol, name + " vs cpu"));
      EXPECT_TRUE(AllClose(AsDouble(hg[l]), ref.hidden[l], atol, kRtol, name + " vs f64"));
    }
    const std::vector<double> lgd(lg.begin(), lg.end()), lcd(lc.begin(), lc.end());
    const double atol = kAtol * Rms(ref.logits);
    EXPECT_TRUE(AllClose(lgd, lcd, atol, kRtol, "logits vs cpu"));
    EXPECT_TRUE(AllClose(lgd, ref.logits, atol, kRtol, "logits vs f64"));
  }
}

TEST_F(Qwen3TargetCudaTest, SteadyStateAllocatesNothingAndCapturesInAGraph) {
  TransformerConfig cfg = testing::TinyConfig(false, false);
  cfg.head_dim = cfg.rotary_dim = 64;
  const testing::HostWeights w = testing::RandomHostWeights(cfg, 5);
  testing::ScratchDir dir;
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), cfg, w).ok());
  auto target = Qwen3Target::Load(dir.path(), *pool_,
                                  {.max_tokens = 256, .stream = stream_.get()});
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  HostBatch b = testing::MakeBatch({64, 100, 36}, cfg.vocab_size, 4);
  const int64_t t = 200;
  DeviceBatch db = Upload(*pool_, b);
  Tensor eager = testing::EmptyTensor(*pool_, DType::kBF16, {t, cfg.hidden_size});
  Tensor graphed = testing::EmptyTensor(*pool_, DType::kBF16, {t, cfg.hidden_size});
  const LayerCapture first[] = {{1, eager.view()}};
  ASSERT_TRUE((*target)->Forward(db.view(), first).ok());  // warm-up: plans are made here
  ASSERT_TRUE(stream_.Synchronize().ok());

  const int64_t allocs = pool_->stats().num_allocs;
  const LayerCapture second[] = {{1, graphed.view()}};
  cudaStream_t s = reinterpret_cast<cudaStream_t>(stream_.get());
  ASSERT_EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const Status st = (*target)->Forward(db.view(), second);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(s, &graph), cudaSuccess) << "Forward broke stream capture";
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(pool_->stats().num_allocs, allocs) << "Forward allocated from the pool";
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
  ASSERT_TRUE(stream_.Synchronize().ok());
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  EXPECT_TRUE(kernels::testing::BitEqual(ToHost<bf16>(graphed.view()), ToHost<bf16>(eager.view())));
}

// A Qwen3-MoE target in fp8 loaded layer by layer on CUDA (each layer's attention projections
// and experts staged in bf16, quantized, the buffer back to the pool on the stream) gives bit
// for bit the forward of quantizing a whole bf16 load at Create, and the load's high-water
// mark above what it keeps is one staged layer.
TEST_F(Qwen3TargetCudaTest, MoeFp8StagedLoadEqualsQuantizeAfterLoad) {
  if (!kernels::cuda::CheckFp8Device(0).ok()) GTEST_SKIP() << "FP8 needs sm_90 or newer";
  TransformerConfig cfg = testing::TinyMoeConfig();  // layer 1 dense
  cfg.hidden_size = 128;
  cfg.head_dim = cfg.rotary_dim = 32;
  cfg.intermediate_size = 256;
  cfg.num_hidden_layers = 6;
  cfg.layer_types.assign(6, LayerType::kFullAttention);
  cfg.moe->num_experts = 16;
  cfg.moe->moe_intermediate_size = 64;
  const int64_t layer_experts = 16 * 3 * 64 * 128 * 2, moe_layers = 5;
  const testing::HostWeights w = testing::RandomHostWeights(cfg, 41);
  testing::ScratchDir dir;
  ASSERT_TRUE(testing::WriteCheckpoint(dir.path(), cfg, w).ok());
  const Qwen3TargetOptions fp8{.max_tokens = 64, .stream = stream_.get(),
                               .precision = TargetPrecision::kFp8};
  HostBatch b = testing::MakeBatch({17, 30, 5}, cfg.vocab_size, 6);
  auto staged = Qwen3Target::Load(dir.path(), *pool_, fp8);
  ASSERT_TRUE(staged.ok()) << staged.status().ToString();
  auto reader = SafetensorsReader::Open(dir.path());
  ASSERT_TRUE(reader.ok());
  auto whole = Qwen3Weights::Load(cfg, *reader, *pool_, stream_.get());
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  auto after = Qwen3Target::Create(std::move(*whole), fp8);
  ASSERT_TRUE(after.ok()) << after.status().ToString();
  std::vector<std::vector<bf16>> hs, ha;
  std::vector<float> ls, la;
  Run(**staged, *pool_, b, &hs, &ls);
  Run(**after, *pool_, b, &ha, &la);
  for (size_t l = 0; l < hs.size(); ++l)
    EXPECT_TRUE(kernels::testing::BitEqual(hs[l], ha[l])) << "layer " << l;
  EXPECT_EQ(ls, la);

  kernels::DevicePools own;  // a fresh pool: its own high-water mark
  kernels::CachingPool* pool = own.Pool(0).value();
  {
    auto codes = Qwen3Fp8Projections::Allocate(cfg, *pool, stream_.get());
    ASSERT_TRUE(codes.ok()) << codes.status().ToString();
    auto kept = Qwen3Weights::Load(cfg, *reader, *pool, stream_.get(),
                                   [&](int64_t layer, const Qwen3LayerWeights& v,
                                       kernels::Stream s) {
                                     return codes->QuantizeLayer(layer, v, s);
                                   });
    ASSERT_TRUE(kept.ok()) << kept.status().ToString();
    ASSERT_TRUE(stream_.Synchronize().ok());
    const kernels::AllocatorStats st = pool->stats();
    const int64_t transient = st.high_water_in_use - st.in_use_bytes;
    EXPECT_GE(transient, layer_experts);
    EXPECT_LE(transient, (Qwen3Weights::StagingBytes(cfg) + 511) / 512 * 512);
    EXPECT_LT(transient, moe_layers * layer_experts / 2);
  }
  ASSERT_TRUE(stream_.Synchronize().ok());
}

TEST_F(Qwen3TargetCudaTest, GoldenMatchesTransformers) {
  if (!testing::HaveQwen3Golden()) GTEST_SKIP() << testing::kNoGoldenMessage;
  testing::CheckQwen3Golden(Device::Cuda(0), stream_.get());
}

TEST_F(Qwen3TargetCudaTest, MoeGoldenMatchesTransformers) {
  const testing::GoldenSet g = testing::Qwen3MoeGolden();
  if (!testing::HaveGolden(g)) GTEST_SKIP() << g.missing;
  testing::CheckQwen3Golden(Device::Cuda(0), stream_.get(), g);
}

// The real-size check: a Qwen3-8B-shaped random checkpoint written by save_pretrained
// (sharded) and its transformers hidden states (tests/golden/make_qwen3_8b_shaped.py).
TEST_F(Qwen3TargetCudaTest, Qwen3_8bShapedMatchesTransformers) {
  const char* dir = std::getenv("TANDEM_QWEN3_8B_SHAPED_DIR");
  if (dir == nullptr) GTEST_SKIP() << "set TANDEM_QWEN3_8B_SHAPED_DIR (make_qwen3_8b_shaped.py)";
  auto reader = SafetensorsReader::Open(std::string(dir) + "/golden_hidden.safetensors");
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  HostBatch b;
  b.ids = testing::ReadI32(*reader, "input_ids");
  b.pos = testing::ReadI32(*reader, "position_ids");
  b.cu = testing::ReadI32(*reader, "cu_seqlens");
  for (size_t i = 0; i + 1 < b.cu.size(); ++i)
    b.max_seqlen = std::max(b.max_seqlen, b.cu[i + 1] - b.cu[i]);
  const int64_t t = static_cast<int64_t>(b.ids.size());
  auto target = Qwen3Target::Load(dir, *pool_, {.max_tokens = t, .stream = stream_.get()});
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  const TransformerConfig& c = (*target)->config();
  std::vector<std::vector<bf16>> hidden;
  std::vector<float> logits;
  Run(**target, *pool_, b, &hidden, &logits);
  for (int l : {1, 9, 17, 25, 33}) {
    const std::string name = "hidden." + std::to_string(l);
    std::vector<float> got;
    for (bf16 x : hidden[l]) got.push_back(x.f());
    EXPECT_TRUE(testing::AsAccurateAsTransformers(got, testing::ReadF32(*reader, name),
                                                  testing::ReadF32(*reader, "bf16_hf." + name),
                                                  name));
  }
  // logits_tail: the last 8 rows of each document.
  std::vector<float> tail;
  for (size_t d = 0; d + 1 < b.cu.size(); ++d)
    for (int64_t r = b.cu[d + 1] - 8; r < b.cu[d + 1]; ++r)
      tail.insert(tail.end(), logits.begin() + r * c.vocab_size,
                  logits.begin() + (r + 1) * c.vocab_size);
  EXPECT_TRUE(testing::AsAccurateAsTransformers(tail, testing::ReadF32(*reader, "logits_tail"),
                                                testing::ReadF32(*reader, "bf16_hf.logits_tail"),
                                                "logits_tail"));
}

}  // namespace
}  // namespace tandem::models
