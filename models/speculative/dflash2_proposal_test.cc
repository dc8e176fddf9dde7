// CPU tests of DFlash2Proposer (dflash2_proposal.h) on a tiny random DFlash2 drafter's
// selector: the greedy walk equals the float64 reference of candidate_selector.h (and differs
// from the plain argmax, so the selector is exercised); a zero successor codebook makes the
// proposal the argmax of the transformed logits; the sampled walk repeats for a seed, moves
// with it, and its q is the reference softmax(S / T) at the drawn path; the limits name the
// key; SparseProposal sorts, drops zeros and renormalises.
#include <cmath>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "models/speculative/dflash2_proposal.h"
#include "models/speculative/dflash2_proposal_test_util.h"

namespace tandem::models {
namespace {

using testing::MakeProposalInputs;
using testing::ProposalInputs;

Result<DFlash2Proposal> ProposeOnCpu(const ProposalInputs& in, float temperature,
                                     uint64_t seed) {
  const testing::ProposalTensors t = testing::UploadInputs(in, kernels::HostAllocator(), nullptr);
  ASSIGN_OR_RETURN(auto p, DFlash2Proposer::Create(in.config, in.blocks * in.n,
                                                   kernels::HostAllocator(),
                                                   kernels::Device::Cpu(), nullptr));
  const std::vector<DFlash2Block> blocks = t.blocks(in, seed);
  return p->Propose(blocks, t.weights(), temperature, nullptr);
}

std::vector<int32_t> Flat(const DFlash2Proposal& p) {
  std::vector<int32_t> out;
  for (const auto& b : p.drafts) out.insert(out.end(), b.begin(), b.end());
  return out;
}

TEST(DFlash2ProposalTest, GreedyWalkMatchesFloat64Reference) {
  const ProposalInputs in = MakeProposalInputs(3, 15, 21);
  const testing::ReferenceCandidates ref = testing::Reference(in);
  const std::vector<int32_t> want = testing::ReferenceGreedyPath(in, ref);
  auto got = ProposeOnCpu(in, 0.0f, 0);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  ASSERT_EQ(got->drafts.size(), 3u);
  EXPECT_TRUE(got->q.empty());
  EXPECT_EQ(Flat(*got), want);
  // The selector changes picks: some differ from each row's best candidate.
  int changed = 0;
  for (size_t r = 0; r < want.size(); ++r) changed += want[r] != ref.ids[r * 7];
  EXPECT_GT(changed, 0);
}

TEST(DFlash2ProposalTest, ZeroSuccessorCodebookProposesTheArgmax) {
  const ProposalInputs in = MakeProposalInputs(2, 9, 5, /*zero_successor=*/true);
  const testing::ReferenceCandidates ref = testing::Reference(in);
  auto got = ProposeOnCpu(in, 0.0f, 0);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const std::vector<int32_t> path = Flat(*got);
  const int64_t v = ref.shape.vocab;
  for (size_t r = 0; r < path.size(); ++r) {
    int32_t best = 0;
    for (int64_t i = 1; i < v; ++i)
      if (ref.logits[r * v + i] > ref.logits[r * v + best]) best = static_cast<int32_t>(i);
    EXPECT_EQ(path[r], best) << "row " << r;
  }
}

TEST(DFlash2ProposalTest, SampledWalkIsSeededAndItsQIsTheSelectorSoftmax) {
  const ProposalInputs in = MakeProposalInputs(4, 15, 8);
  const float temperature = 0.7f;
  auto a = ProposeOnCpu(in, temperature, 42);
  auto b = ProposeOnCpu(in, temperature, 42);
  auto c = ProposeOnCpu(in, temperature, 43);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok()) << a.status().ToString();
  EXPECT_EQ(Flat(*a), Flat(*b));
  EXPECT_NE(Flat(*a), Flat(*c));  // 60 draws from q over 7 candidates
  ASSERT_EQ(a->q.size(), 4u);
  // q of each row against softmax(S / T) in float64, S with prev = the drawn path.
  const testing::ReferenceCandidates ref = testing::Reference(in);
  const auto& s = ref.shape;
  for (int64_t blk = 0; blk < in.blocks; ++blk)
    for (int64_t i = 0; i < in.n; ++i) {
      const int64_t r = blk * in.n + i;
      const int32_t prev = i == 0 ? in.anchors[blk] : a->drafts[blk][i - 1];
      std::vector<double> scores(static_cast<size_t>(s.top_k)), proj(s.rank);
      kernels::dflash2::SelectorShape one = s;
      one.rows = 1;
      kernels::dflash2::SelectorScoresForward<double>(
          one, &ref.hidden[r * s.hidden], ref.wh.data(), ref.pred.data(), ref.succ.data(), &prev,
          &ref.ids[r * s.top_k], &ref.values[r * s.top_k], proj.data(), scores.data());
      double max = scores[0], sum = 0;
      for (double x : scores) max = std::max(max, x);
      for (double& x : scores) sum += (x = std::exp((x - max) / temperature));
      const TokenDist& q = a->q[blk][i];
      double total = 0;
      for (size_t j = 1; j < q.ids.size(); ++j) EXPECT_LT(q.ids[j - 1], q.ids[j]);
      for (int64_t j = 0; j < s.top_k; ++j)
        EXPECT_NEAR(q.Prob(ref.ids[r * s.top_k + j]), scores[j] / sum, 2e-3)
            << "block " << blk << " row " << i << " slot " << j;
      for (double p : q.probs) total += p;
      EXPECT_NEAR(total, 1.0, 1e-12);
      EXPECT_GT(q.Prob(a->drafts[blk][i]), 0.0);
    }
}

TEST(DFlash2ProposalTest, LimitsNameTheKey) {
  DFlashConfig c = testing::TinyDFlash2Config();
  EXPECT_TRUE(CheckDFlash2ProposalLimits(c, kernels::Device::Cpu()).ok());
  c.dflash2->selector_top_k = 65;
  Status st = CheckDFlash2ProposalLimits(c, kernels::Device::Cpu());
  EXPECT_NE(st.ToString().find("selector_top_k 65"), std::string::npos) << st.ToString();
  c.dflash2->selector_top_k = 5;
  c.dflash2->selector_rank = 4096;
  EXPECT_TRUE(CheckDFlash2ProposalLimits(c, kernels::Device::Cpu()).ok());
  st = CheckDFlash2ProposalLimits(c, kernels::Device::Cuda(0));
  EXPECT_NE(st.ToString().find("selector_rank 4096 exceeds 2048"), std::string::npos)
      << st.ToString();
  DFlashConfig plain = testing::TinyDFlashConfig();
  EXPECT_TRUE(CheckDFlash2ProposalLimits(plain, kernels::Device::Cuda(0)).ok());
  EXPECT_FALSE(DFlash2Proposer::Create(plain, 4, kernels::HostAllocator(),
                                       kernels::Device::Cpu(), nullptr).ok());
}

TEST(DFlash2ProposalTest, SparseProposalSortsDropsZerosAndRenormalises) {
  const int32_t ids[] = {9, 2, 40, 5};
  const float probs[] = {0.5f, 0.25f, 0.0f, 0.2f};
  const TokenDist d = SparseProposal(ids, probs, 4);
  EXPECT_EQ(d.ids, (std::vector<int32_t>{2, 5, 9}));
  ASSERT_EQ(d.probs.size(), 3u);
  EXPECT_NEAR(d.probs[0], 0.25 / 0.95, 1e-7);
  EXPECT_NEAR(d.probs[2], 0.5 / 0.95, 1e-7);
  EXPECT_EQ(d.Prob(40), 0.0);
}

TEST(DFlash2ProposalTest, WorkspaceBytesAreWhatCreateAllocates) {
  const ProposalInputs in = MakeProposalInputs(1, 1, 1);
  auto p = DFlash2Proposer::Create(in.config, 13, kernels::HostAllocator(),
                                   kernels::Device::Cpu(), nullptr);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ((*p)->workspace_bytes(), DFlash2Proposer::WorkspaceBytes(in.config, 13));
  EXPECT_EQ(DFlash2Proposer::WorkspaceBytes(testing::TinyDFlashConfig(), 13), 0);
}

}  // namespace
}  // namespace tandem::models
