// Test helpers for the Qwen3.5 target tests: the committed goldens of
// tests/golden/make_qwen3_5_golden.py, tensor reads, and the "as accurate as transformers'
// bf16" criterion. Test-only; expects TANDEM_SOURCE_DIR to be defined.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "kernels/core/dtype.h"
#include "kernels/testing/testing.h"
#include "models/io/safetensors.h"

namespace tandem::models::testing {

using kernels::bf16;
using kernels::DType;

inline const std::string kDir = std::string(TANDEM_SOURCE_DIR) + "/tests/golden/qwen3_5_tiny";
inline const std::string kGolden =
    std::string(TANDEM_SOURCE_DIR) + "/tests/golden/qwen3_5_tiny_golden.safetensors";

template <typename T>
inline std::vector<T> Read(const SafetensorsReader& r, const std::string& name, DType as) {
  auto t = r.Get(name);
  TANDEM_CHECK_OK(t.status());
  std::vector<T> v(static_cast<size_t>((*t)->numel()));
  TANDEM_CHECK_OK(r.Read(**t, as, v.data(), (*t)->numel() * static_cast<int64_t>(sizeof(T))));
  return v;
}

// As accurate as transformers' own bf16 forward (the criterion of the Qwen3 goldens): max
// |err| against the fp32 reference at most twice HF's + 1e-3, relative L2 at most
// max(1e-2, 1.5x HF's).
inline ::testing::AssertionResult AsAccurateAsHf(const std::vector<bf16>& got,
                                                 const std::vector<float>& ref,
                                                 const std::vector<float>& hf,
                                                 const std::string& what) {
  double ours = 0, theirs = 0, num = 0, num_hf = 0, den = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double e = static_cast<double>(got[i].f()) - ref[i];
    const double e_hf = static_cast<double>(hf[i]) - ref[i];
    ours = std::max(ours, std::abs(e));
    theirs = std::max(theirs, std::abs(e_hf));
    num += e * e;
    num_hf += e_hf * e_hf;
    den += static_cast<double>(ref[i]) * ref[i];
  }
  const double rel = std::sqrt(num / den), rel_hf = std::sqrt(num_hf / den);
  ::testing::AssertionResult r = (ours <= 2 * theirs + 1e-3 && rel <= std::max(1e-2, 1.5 * rel_hf))
                                     ? ::testing::AssertionSuccess()
                                     : ::testing::AssertionFailure();
  return r << what << ": max |err| " << ours << " (HF bf16 " << theirs << "), relative L2 " << rel
           << " (HF bf16 " << rel_hf << ")";
}

}  // namespace tandem::models::testing
