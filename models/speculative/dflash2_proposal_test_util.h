// Test-only inputs of DFlash2Proposer (dflash2_proposal.h): a tiny random DFlash2 drafter's
// selector weights and LM head, final hidden rows of a few blocks, and their anchors (host
// bf16 values, Philox-drawn), plus the float64 reference proposal from candidate_selector.h;
// and a DFlash config made a DFlash2 one with a DFlash drafter's tensors copied in. Shared by
// the CPU tests and the GPU test. Thread-safety: test fixtures, one thread.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/core/memory.h"
#include "kernels/dflash2/candidate_selector.h"
#include "kernels/dflash2/logit_softcap.h"
#include "kernels/random/philox.h"
#include "models/dflash/dflash_test_util.h"
#include "models/speculative/dflash2_proposal.h"

namespace tandem::models::testing {

struct ProposalInputs {
  DFlashConfig config;
  int64_t blocks = 0, n = 0;  // blocks of n draft rows
  std::vector<kernels::bf16> lm_head, wh, pred, succ, hidden;
  std::vector<int32_t> anchors;
};

inline std::vector<kernels::bf16> RandomBf16(int64_t count, float scale, uint64_t seed,
                                             uint64_t stream) {
  std::vector<kernels::bf16> v(static_cast<size_t>(count));
  for (int64_t i = 0; i < count; ++i)
    v[i] = kernels::bf16(scale * (2 * kernels::PhiloxUniform(seed, stream, i) - 1));
  return v;
}

// The tiny DFlash2 config (V 97, H 64, rank 8) with top-k 7, multiplier 1.5 and cap 6; the
// selector's pair terms are of the size of the gaps between the candidates' logits, so the
// walk picks other tokens than the argmax (tests check that it does).
inline ProposalInputs MakeProposalInputs(int64_t blocks, int64_t n, uint64_t seed,
                                         bool zero_successor = false) {
  ProposalInputs in;
  in.config = TinyDFlash2Config();
  in.config.dflash2->selector_top_k = 7;
  in.config.dflash2->output_multiplier = 1.5;
  in.config.dflash2->final_logit_softcapping = 6.0;
  in.blocks = blocks;
  in.n = n;
  const int64_t v = in.config.layers.vocab_size, h = in.config.layers.hidden_size;
  const int64_t r = in.config.dflash2->selector_rank;
  in.lm_head = RandomBf16(v * h, 0.25f, seed, 1);
  in.wh = RandomBf16(r * h, 0.5f, seed, 2);
  in.pred = RandomBf16(v * r, 1.0f, seed, 3);
  in.succ = RandomBf16(v * r, zero_successor ? 0.0f : 1.0f, seed, 4);
  in.hidden = RandomBf16(blocks * n * h, 1.0f, seed, 5);
  for (int64_t b = 0; b < blocks; ++b)
    in.anchors.push_back(static_cast<int32_t>(kernels::PhiloxUniform(seed, 6, b) * v) % v);
  return in;
}

inline std::vector<double> ToDouble(const std::vector<kernels::bf16>& x) {
  std::vector<double> d(x.size());
  for (size_t i = 0; i < x.size(); ++i) d[i] = x[i].f();
  return d;
}

// The float64 reference of the inputs' rows: transformed logits, top-k (ids, values) and the
// selector projection P, row-major.
struct ReferenceCandidates {
  kernels::dflash2::SelectorShape shape;
  std::vector<int32_t> ids;
  std::vector<double> values, proj, logits, hidden, wh, pred, succ;
};

inline ReferenceCandidates Reference(const ProposalInputs& in) {
  ReferenceCandidates ref;
  const DFlash2Extension& e = *in.config.dflash2;
  const int64_t rows = in.blocks * in.n;
  ref.shape = {rows, in.config.layers.hidden_size, in.config.layers.vocab_size,
               e.selector_rank, e.selector_top_k};
  const auto& s = ref.shape;
  ref.hidden = ToDouble(in.hidden);
  ref.wh = ToDouble(in.wh);
  ref.pred = ToDouble(in.pred);
  ref.succ = ToDouble(in.succ);
  const std::vector<double> head = ToDouble(in.lm_head);
  ref.logits.assign(static_cast<size_t>(rows * s.vocab), 0.0);
  ref.proj.assign(static_cast<size_t>(rows * s.rank), 0.0);
  for (int64_t t = 0; t < rows; ++t) {
    for (int64_t v = 0; v < s.vocab; ++v)
      for (int64_t j = 0; j < s.hidden; ++j)
        ref.logits[t * s.vocab + v] += ref.hidden[t * s.hidden + j] * head[v * s.hidden + j];
    for (int64_t q = 0; q < s.rank; ++q)
      for (int64_t j = 0; j < s.hidden; ++j)
        ref.proj[t * s.rank + q] += ref.hidden[t * s.hidden + j] * ref.wh[q * s.hidden + j];
  }
  kernels::dflash2::LogitSoftcapForward<double>(
      rows * s.vocab, e.output_multiplier, e.final_logit_softcapping.value_or(0.0),
      ref.logits.data(), ref.logits.data());
  ref.ids.resize(static_cast<size_t>(rows * s.top_k));
  ref.values.resize(static_cast<size_t>(rows * s.top_k));
  kernels::dflash2::SelectorTopK<double>(s, ref.logits.data(), ref.ids.data(),
                                         ref.values.data());
  return ref;
}

// The reference greedy walk of every block.
inline std::vector<int32_t> ReferenceGreedyPath(const ProposalInputs& in,
                                                const ReferenceCandidates& ref) {
  std::vector<int32_t> path(static_cast<size_t>(in.blocks * in.n));
  const auto& s = ref.shape;
  for (int64_t b = 0; b < in.blocks; ++b) {
    const int64_t r0 = b * in.n;
    kernels::dflash2::SelectorGreedyPath<double>(
        s, in.n, &ref.proj[r0 * s.rank], ref.pred.data(), ref.succ.data(),
        &ref.ids[r0 * s.top_k], &ref.values[r0 * s.top_k], in.anchors[b], &path[r0]);
  }
  return path;
}

// The proposer's inputs as tensors from `alloc` (host or device).
struct ProposalTensors {
  kernels::Tensor lm_head, wh, pred, succ, hidden;
  DFlash2ProposalWeights weights() const {
    return {lm_head.view(), wh.view(), pred.view(), succ.view()};
  }
  std::vector<DFlash2Block> blocks(const ProposalInputs& in, uint64_t seed) const {
    std::vector<DFlash2Block> out;
    for (int64_t b = 0; b < in.blocks; ++b)
      out.push_back({hidden.view().Narrow(0, b * in.n, in.n), in.anchors[b],
                     DrawKey{seed, static_cast<uint64_t>(b), 3}});
    return out;
  }
};

inline kernels::Tensor Upload(const std::vector<kernels::bf16>& host, kernels::Shape shape,
                              kernels::Allocator& alloc, kernels::Stream s) {
  auto t = kernels::Tensor::Empty(alloc, kernels::DType::kBF16, shape, s);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_TRUE(kernels::CopyFromHost(t->view(), host.data(), s).ok());
  return std::move(*t);
}

// `c` as a DFlash2 config: rank 8, top-k 6, 2 taps in groups of 16, bidirectional.
inline DFlashConfig AsDFlash2(DFlashConfig c) {
  c.layers.architectures = {"DFlash2DraftModel"};
  c.is_causal = false;
  DFlash2Extension e;
  e.conv_kernel_size = 2;
  e.conv_group_size = 16;
  e.selector_rank = 8;
  e.selector_top_k = 6;
  c.dflash2 = e;
  return c;
}

// Host params: `to` freshly initialised (identity convolutions, zero projections and
// successor codebook: a DFlash drafter with a no-op selector), then every tensor of `from`
// copied by name.
inline void InitFromDFlash(const DFlashParams& from, DFlashParams& to) {
  ASSERT_TRUE(to.InitFromScratch(7, nullptr).ok());
  float* m = to.master.view().data_as<float>();
  for (const DFlashParamSpec& t : to.layout.specs)
    for (const DFlashParamSpec& f : from.layout.specs)
      if (f.name == t.name)
        std::memcpy(m + t.offset, from.master.view().data_as<float>() + f.offset,
                    f.numel() * 4);
  ASSERT_TRUE(to.SyncCompute(nullptr).ok());
}

inline ProposalTensors UploadInputs(const ProposalInputs& in, kernels::Allocator& alloc,
                                    kernels::Stream s) {
  const int64_t v = in.config.layers.vocab_size, h = in.config.layers.hidden_size;
  const int64_t r = in.config.dflash2->selector_rank;
  ProposalTensors t;
  t.lm_head = Upload(in.lm_head, {v, h}, alloc, s);
  t.wh = Upload(in.wh, {r, h}, alloc, s);
  t.pred = Upload(in.pred, {v, r}, alloc, s);
  t.succ = Upload(in.succ, {v, r}, alloc, s);
  t.hidden = Upload(in.hidden, {in.blocks * in.n, h}, alloc, s);
  return t;
}

}  // namespace tandem::models::testing
