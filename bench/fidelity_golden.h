// The golden batch of `tandem-bench fidelity` and the checks that it fits a model.
//
// A golden file (tests/golden/golden_common.py's layout, written by
// tests/golden/target_fidelity.py or make_qwen3_8b_shaped.py) holds the packed batch
// (input_ids, position_ids, cu_seqlens), the fp32 reference hidden.{i} [T, H] of every layer
// it checks, and optionally logits_tail [kFidelityTailRows * docs, V]: the fp32 logits of
// the last kFidelityTailRows tokens of each document. ReadFidelityGolden reads and checks
// the batch on its own (boundaries, positions, document lengths); CheckGoldenFitsModel then
// checks it against the model it is run on, so a golden made for another checkpoint is
// refused before anything is loaded onto the GPU, naming the key that disagrees.
//
// Thread-safety: plain functions and values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "runtime/core/status.h"

namespace tandem::bench {

inline constexpr int64_t kFidelityTailRows = 8;  // logits rows kept per document

struct FidelityGolden {
  std::string path;                // for messages
  std::vector<int32_t> ids, pos, cu;
  std::vector<int> layers;         // the hidden.{i} the file holds, ascending
  int64_t hidden_size = 0;         // the hidden.{i} tensors' width (all equal)
  int64_t vocab_size = 0;          // logits_tail's width; 0 when the file has none
  int max_seqlen = 0;
  int64_t tokens() const { return static_cast<int64_t>(ids.size()); }
  int64_t documents() const { return static_cast<int64_t>(cu.size()) - 1; }
};

// What CheckGoldenFitsModel compares, from the model's config.json (`source` names it).
struct FidelityModelShape {
  std::string source;
  int64_t hidden_size = 0;
  int64_t vocab_size = 0;
  int64_t num_hidden_layers = 0;
};

// Reads `path`. NotFound when it is missing or holds no hidden.{i}; InvalidArgument naming
// the tensor when shapes disagree (input_ids vs position_ids vs hidden.{i} rows), when
// cu_seqlens is not 0 .. T ascending, when positions do not restart at 0 in every document,
// or when a document is shorter than kFidelityTailRows (the logits tail needs that many).
Result<FidelityGolden> ReadFidelityGolden(const std::string& path);

// InvalidArgument naming the golden's tensor and the model's key when the hidden size, the
// vocabulary (logits_tail's width, and every input id) or a layer id does not fit `model`.
Status CheckGoldenFitsModel(const FidelityGolden& golden, const FidelityModelShape& model);

}  // namespace tandem::bench
