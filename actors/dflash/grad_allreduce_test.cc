// GradientAllReduce on the CPU: replicas on threads get the bit-identical average (summed in
// rank order), over several steps; a replica that leaves releases the waiting ones with an
// error naming it instead of a hang.
#include "actors/dflash/grad_allreduce.h"

#include <cstring>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

namespace tandem::dflash {
namespace {

kernels::TensorView View(std::vector<float>& v) {
  return kernels::TensorView(v.data(), kernels::DType::kF32,
                             kernels::Shape({static_cast<int64_t>(v.size())}),
                             kernels::Device::Cpu());
}

TEST(GradAllReduceTest, ThreeCpuReplicasGetTheBitIdenticalAverage) {
  constexpr int kRanks = 3, kSteps = 4;
  constexpr int64_t kN = 1001;  // not a multiple of the ranks: uneven slices
  std::vector<std::vector<float>> grads(kRanks, std::vector<float>(kN));
  std::vector<Status> status(kRanks);
  std::vector<std::thread> threads;
  JobRegistry job;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      auto ar = JoinGradientAllReduce(job, "drafter", kRanks, r, kernels::Device::Cpu());
      if (!ar.ok()) {
        status[r] = ar.status();
        return;
      }
      for (int step = 0; step < kSteps && status[r].ok(); ++step) {
        for (int64_t i = 0; i < kN; ++i) grads[r][i] = 0.1f * (r + 1) * (i % 17) + step;
        status[r] = (*ar)->AllReduceAvg(View(grads[r]), nullptr);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) ASSERT_TRUE(status[r].ok()) << status[r].ToString();
  const int last = kSteps - 1;
  for (int64_t i = 0; i < kN; ++i) {
    float sum = 0.f;  // the documented order: rank 0, 1, 2, then times 1/3
    for (int r = 0; r < kRanks; ++r) sum += 0.1f * (r + 1) * (i % 17) + last;
    const float want = sum * (1.0f / kRanks);
    for (int r = 0; r < kRanks; ++r)
      ASSERT_EQ(std::memcmp(&grads[r][i], &want, sizeof(float)), 0) << "rank " << r << " i " << i;
  }
}

TEST(GradAllReduceTest, ALeavingReplicaReleasesTheOthersWithAnError) {
  std::vector<float> g0(8, 1.f), g1(8, 2.f);
  Status waiting;
  JobRegistry job;
  std::thread t([&] {
    // Joining after rank 0 left fails at once, with the same message.
    auto ar = JoinGradientAllReduce(job, "drafter", 2, 1, kernels::Device::Cpu());
    waiting = ar.ok() ? (*ar)->AllReduceAvg(View(g1), nullptr) : ar.status();
  });
  {
    auto ar = JoinGradientAllReduce(job, "drafter", 2, 0, kernels::Device::Cpu());
    ASSERT_TRUE(ar.ok());
    (*ar)->Leave("its channel closed");
  }
  t.join();
  EXPECT_EQ(waiting.code(), StatusCode::kUnavailable);
  EXPECT_NE(waiting.message().find("replica 0 left after 0 all-reduces: its channel closed"),
            std::string::npos) << waiting.ToString();
}

TEST(GradAllReduceTest, EachJobHasItsOwnRendezvous) {
  // Job A's group "drafter" is left broken (rank 0 of 2 gone, rank 1 never came).
  JobRegistry a, b;
  {
    auto ar = JoinGradientAllReduce(a, "drafter", 2, 0, kernels::Device::Cpu());
    ASSERT_TRUE(ar.ok());
    (*ar)->Leave("job A failed");
  }
  // Job B's group of the same name is a different one: one replica averages on its own.
  auto ar = JoinGradientAllReduce(b, "drafter", 1, 0, kernels::Device::Cpu());
  ASSERT_TRUE(ar.ok()) << ar.status().ToString();
  std::vector<float> g(5, 3.f);
  ASSERT_TRUE((*ar)->AllReduceAvg(View(g), nullptr).ok());
  EXPECT_EQ(g[4], 3.f);
  // While job A's group stays broken for a late joiner.
  auto late = JoinGradientAllReduce(a, "drafter", 2, 1, kernels::Device::Cpu());
  ASSERT_FALSE(late.ok());
  EXPECT_NE(late.status().message().find("job A failed"), std::string::npos);
}

}  // namespace
}  // namespace tandem::dflash
