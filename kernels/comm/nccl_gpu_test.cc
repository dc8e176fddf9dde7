// NCCL communicators: a single-rank communicator (all-reduce is the identity) on one GPU,
// and, where at least two GPUs are visible, all-reduce sum/avg in bf16/f32 and send/recv
// between ranks made by CreateLocal and by Create on threads sharing a unique id.
#include <gtest/gtest.h>

#include <cuda_runtime_api.h>

#include <thread>
#include <vector>

#include "kernels/testing/math_testing.h"
#include "kernels/comm/nccl.h"

namespace tandem::kernels {
namespace {

using testing::DeviceArray;

int DeviceCount() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess ? n : 0;
}

TEST(NcclSingleRank, AllReduceIsIdentity) {
  auto id = NcclComm::NewUniqueId();
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  auto comm = NcclComm::Create(*id, 1, 0, 0);
  ASSERT_TRUE(comm.ok()) << comm.status().ToString();
  EXPECT_EQ((*comm)->size(), 1);
  std::vector<float> host = testing::RandomF32(1001, 1);
  DeviceArray<float> send(host), recv(1001);
  ASSERT_TRUE((*comm)->AllReduce(send.View(DType::kF32, {1001}), recv.View(DType::kF32, {1001}),
                                 ReduceOp::kSum, nullptr).ok());
  EXPECT_EQ(recv.ToHost(), host);
  auto hb = testing::RandomBf16(77, 2);
  DeviceArray<bf16> inplace(hb);
  ASSERT_TRUE((*comm)->AllReduce(inplace.View(DType::kBF16, {77}), inplace.View(DType::kBF16, {77}),
                                 ReduceOp::kAvg, nullptr).ok());
  auto got = inplace.ToHost();
  for (int i = 0; i < 77; ++i) EXPECT_EQ(got[i].bits, hb[i].bits) << i;
}

TEST(NcclSingleRank, RejectsViewsOnAnotherDevice) {
  auto id = NcclComm::NewUniqueId();
  ASSERT_TRUE(id.ok());
  auto comm = NcclComm::Create(*id, 1, 0, 0);
  ASSERT_TRUE(comm.ok());
  std::vector<float> host(4);
  TensorView cpu_view(host.data(), DType::kF32, {4});
  EXPECT_EQ((*comm)->AllReduce(cpu_view, cpu_view, ReduceOp::kSum, nullptr).code(),
            StatusCode::kInvalidArgument);
}

// Each rank r holds x_r[i] = r + i/1024 (exact in bf16 for small i); sum = n*i/1024 + n(n-1)/2.
void CheckAllReduce(std::vector<std::unique_ptr<NcclComm>>& comms, DType dtype, ReduceOp op) {
  const int n = static_cast<int>(comms.size());
  const int64_t len = 1000;
  std::vector<std::unique_ptr<DeviceArray<float>>> f32;
  std::vector<std::unique_ptr<DeviceArray<bf16>>> b16;
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(cudaSetDevice(comms[r]->device()), cudaSuccess);
    std::vector<float> x(len);
    for (int64_t i = 0; i < len; ++i) x[i] = r + (i % 64) / 64.f;
    std::vector<bf16> xb(len);
    for (int64_t i = 0; i < len; ++i) xb[i] = bf16(x[i]);
    f32.push_back(std::make_unique<DeviceArray<float>>(x));
    b16.push_back(std::make_unique<DeviceArray<bf16>>(xb));
  }
  {
    NcclGroup group;
    for (int r = 0; r < n; ++r) {
      TensorView v = dtype == DType::kF32 ? f32[r]->View(dtype, {len}, comms[r]->device())
                                          : b16[r]->View(dtype, {len}, comms[r]->device());
      ASSERT_TRUE(comms[r]->AllReduce(v, v, op, nullptr).ok());
    }
    ASSERT_TRUE(group.End().ok());
  }
  for (int r = 0; r < n; ++r) {
    ASSERT_EQ(cudaSetDevice(comms[r]->device()), cudaSuccess);
    auto hf = f32[r]->ToHost();
    auto hb = b16[r]->ToHost();
    for (int64_t i = 0; i < len; ++i) {
      double want = n * ((i % 64) / 64.0) + n * (n - 1) / 2.0;
      if (op == ReduceOp::kAvg) want /= n;
      // Sums of values with 6 fractional bits and small integer parts are exact in both
      // dtypes; the average divides by n, exact for n a power of two, else one rounding.
      double got = dtype == DType::kF32 ? hf[i] : hb[i].f();
      ASSERT_NEAR(got, want, dtype == DType::kF32 ? 1e-6 : want / 128) << "rank " << r << " i " << i;
    }
  }
}

TEST(NcclMultiGpu, CreateLocalAllReduceAndSendRecv) {
  if (DeviceCount() < 2) GTEST_SKIP() << "needs >= 2 visible GPUs, found " << DeviceCount();
  std::vector<int> devices(DeviceCount());
  for (size_t i = 0; i < devices.size(); ++i) devices[i] = static_cast<int>(i);
  auto comms = NcclComm::CreateLocal(devices);
  ASSERT_TRUE(comms.ok()) << comms.status().ToString();
  CheckAllReduce(*comms, DType::kF32, ReduceOp::kSum);
  CheckAllReduce(*comms, DType::kBF16, ReduceOp::kSum);
  CheckAllReduce(*comms, DType::kF32, ReduceOp::kAvg);
  CheckAllReduce(*comms, DType::kBF16, ReduceOp::kAvg);

  // Rank 0 sends 4104 floats to rank 1.
  auto payload = testing::RandomF32(4104, 9);
  ASSERT_EQ(cudaSetDevice(0), cudaSuccess);
  DeviceArray<float> src(payload);
  ASSERT_EQ(cudaSetDevice(1), cudaSuccess);
  DeviceArray<float> dst(4104);
  {
    NcclGroup group;
    ASSERT_TRUE((*comms)[0]->Send(src.View(DType::kF32, {4104}, 0), 1, nullptr).ok());
    ASSERT_TRUE((*comms)[1]->Recv(dst.View(DType::kF32, {4104}, 1), 0, nullptr).ok());
    ASSERT_TRUE(group.End().ok());
  }
  EXPECT_EQ(dst.ToHost(), payload);
}

TEST(NcclMultiGpu, CreateOnThreadsWithSharedUniqueId) {
  if (DeviceCount() < 2) GTEST_SKIP() << "needs >= 2 visible GPUs, found " << DeviceCount();
  auto id = NcclComm::NewUniqueId();
  ASSERT_TRUE(id.ok());
  std::vector<std::unique_ptr<NcclComm>> comms(2);
  std::vector<Status> status(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      auto c = NcclComm::Create(*id, 2, r, r);
      if (c.ok()) comms[r] = std::move(c).value(); else status[r] = c.status();
    });
  for (auto& t : threads) t.join();
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(status[r].ok()) << status[r].ToString();
  CheckAllReduce(comms, DType::kF32, ReduceOp::kSum);
}

}  // namespace
}  // namespace tandem::kernels
