// Building a BatchSource from a job file section, and the library behind `tandem data`.
//
// Section keys (all optional except `data`):
//   data              path to a .jsonl file or a binary set directory, or "synthetic"
//   max_tokens        tokens per packed batch (default 16384; 1024 for synthetic)
//   epochs            passes over the data, 0 = forever (default 1)
//   shuffle           shuffle document order per epoch (default true; files only)
//   vocab             files: every id must be below it (default 0 = unchecked);
//                     synthetic: the vocabulary size (default 256)
//   skip_bad          JSONL: count and skip bad records instead of failing (default false)
//   long_documents    "split" (default) or "truncate" (files only; see packer.h)
//   doc_len           synthetic: [min, max] document length, or one length (default [16, 128])
//   batches_per_epoch synthetic: batches per epoch, all replicas together (default 100)
//
// Thread-safety: free functions; RunDataCommand writes to the stream it is given.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>

#include "actors/data/token_batch.h"
#include "runtime/actor/config.h"

namespace tandem::data {

// The source for target replica `replica` of `replicas`. Errors name the key and where the
// section came from ("job.toml:14: key 'max_tokens': must be positive, got 0").
Result<std::unique_ptr<BatchSource>> MakeBatchSource(const ConfigValue& section, int replica,
                                                     int replicas, int64_t seed);

struct DataCommandOptions {
  std::string input;         // .jsonl file or binary set directory
  std::string output;        // binary set directory to write; empty: only validate and count
  int64_t vocab = 0;         // > 0: every id must be below it
  bool skip_bad = false;     // JSONL: count and skip bad records instead of failing
  std::ostream* out = nullptr;  // where counts are printed; nullptr: std::cout
};

// Converts JSONL to a binary set (when `output` is set), validates the result (or the input
// binary set) fully, and prints document, token and skip counts.
Status RunDataCommand(const DataCommandOptions& options);

}  // namespace tandem::data
