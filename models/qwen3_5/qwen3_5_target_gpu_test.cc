// GPU test of the hybrid target (label gpu; SKIPPED without a device): the CUDA forward on the
// transformers goldens, every layer as accurate as transformers' bf16 forward (the CPU
// test's criterion), and close to the CPU forward.
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "kernels/core/device_pools.h"
#include "kernels/core/memory.h"
#include "kernels/testing/testing.h"
#include "models/qwen3_5/qwen3_5_target.h"
#include "models/qwen3_5/qwen3_5_test_util.h"

namespace tandem::models {
namespace {

using kernels::bf16;
using kernels::Device;
using kernels::DType;
using kernels::Tensor;
using kernels::TensorView;
using kernels::testing::MakeTensor;
using kernels::testing::ToHost;

// Runs the golden batch on `device`, capturing every layer; returns the captures on the host.
std::vector<std::vector<bf16>> RunGolden(Device device, const SafetensorsReader& golden) {
  std::vector<int32_t> ids = testing::Read<int32_t>(golden, "input_ids", DType::kI32),
                       pos = testing::Read<int32_t>(golden, "position_ids", DType::kI32),
                       cu = testing::Read<int32_t>(golden, "cu_seqlens", DType::kI32);
  const int64_t t = static_cast<int64_t>(ids.size()), ncu = static_cast<int64_t>(cu.size());
  kernels::DevicePools pools;  // outlives everything below
  kernels::Allocator* alloc = pools.For(device).value();
  auto target = Qwen35Target::Load(testing::kDir, *alloc, {.max_tokens = t});
  TANDEM_CHECK_OK(target.status());
  const Qwen35Config& c = (*target)->config();
  Tensor ids_t = MakeTensor<int32_t>(*alloc, DType::kI32, {t}, ids);
  Tensor pos_t = MakeTensor<int32_t>(*alloc, DType::kI32, {t}, pos);
  Tensor cu_t = MakeTensor<int32_t>(*alloc, DType::kI32, {ncu}, cu);
  int max_seqlen = 0;
  for (int64_t i = 0; i + 1 < ncu; ++i) max_seqlen = std::max(max_seqlen, cu[i + 1] - cu[i]);
  std::vector<Tensor> bufs;
  std::vector<HybridCapture> caps;
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    bufs.push_back(Tensor::Empty(*alloc, DType::kBF16, {t, c.hidden_size}).value());
    caps.push_back({l, bufs.back().view()});
  }
  const Status st = (*target)->Forward({ids_t, pos_t, cu_t, max_seqlen}, caps);
  EXPECT_TRUE(st.ok()) << st.ToString();
  TANDEM_CHECK_OK(kernels::SynchronizeStream(device, nullptr));
  std::vector<std::vector<bf16>> out;
  for (const HybridCapture& cap : caps) out.push_back(ToHost<bf16>(cap.out));
  return out;
}

TEST(Qwen35TargetGpuTest, GoldenOnCuda) {
  auto golden = SafetensorsReader::Open(testing::kGolden);
  ASSERT_TRUE(golden.ok()) << golden.status().ToString();
  const std::vector<std::vector<bf16>> gpu = RunGolden(Device::Cuda(0), *golden);
  const std::vector<std::vector<bf16>> cpu = RunGolden(Device::Cpu(), *golden);
  for (size_t l = 0; l < gpu.size(); ++l) {
    const std::string name = "hidden." + std::to_string(l);
    ::testing::AssertionResult ok = testing::AsAccurateAsHf(
        gpu[l], testing::Read<float>(*golden, name, DType::kF32),
        testing::Read<float>(*golden, "bf16_hf." + name, DType::kF32), name);
    EXPECT_TRUE(ok);
    std::printf("cuda %s\n", ok.message());
    // CUDA and CPU forwards round at the same points but sum in other orders; their
    // difference is bf16 noise that the layers amplify. Each is as accurate as HF's bf16
    // (checked above), so by the triangle inequality they are within twice HF's relative
    // error of each other; a wrong kernel is far outside that.
    const std::vector<float> ref = testing::Read<float>(*golden, name, DType::kF32);
    const std::vector<float> hf = testing::Read<float>(*golden, "bf16_hf." + name, DType::kF32);
    double num = 0, den = 0, hf_num = 0, ref_den = 0;
    for (size_t i = 0; i < cpu[l].size(); ++i) {
      const double e = gpu[l][i].f() - cpu[l][i].f();
      num += e * e;
      den += static_cast<double>(cpu[l][i].f()) * cpu[l][i].f();
      hf_num += (static_cast<double>(hf[i]) - ref[i]) * (static_cast<double>(hf[i]) - ref[i]);
      ref_den += static_cast<double>(ref[i]) * ref[i];
    }
    EXPECT_LT(std::sqrt(num / den), 2 * std::sqrt(hf_num / ref_den)) << name;
  }
}

}  // namespace
}  // namespace tandem::models
