// Building a BatchSource (data/corpus) from a job file section: the actors' side of the data
// layer, which reads the section's keys and locations (runtime/actor/config.h) so that data/
// itself depends on runtime/core only. The keys are declared in source_keys.h.
//
// Section keys (all optional except `data`):
//   data              path to a .jsonl file or a binary set directory, or "synthetic"
//   max_tokens        tokens per packed batch (default 16384; 1024 for synthetic)
//   epochs            passes over the data, 0 = forever (default 1)
//   shuffle           shuffle document order per epoch (default true; files only)
//   vocab             files: every id must be below it (default: the vocab_size of the model
//                     the source feeds, SourceTarget; 0 = unchecked when there is none);
//                     synthetic: the vocabulary size (default: the model's, else 256).
//                     Above the model's vocab_size is an error.
//   skip_bad          count and skip bad JSONL records, and documents of a binary set with
//                     an id not below vocab, instead of failing (default false)
//   long_documents    "split" (default) or "truncate" (files only; see packer.h)
//   doc_len           synthetic: [min, max] document length, or one length (default [16, 128])
//   batches_per_epoch synthetic: batches per epoch, all replicas together (default 100)
//
// Thread-safety: a free function.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "data/corpus/token_batch.h"
#include "runtime/actor/config.h"

namespace tandem::data {

// The model a source feeds, as far as the data layer needs it: ids at or above its
// vocab_size have no embedding row (they would train silently to a loss of 0).
struct SourceTarget {
  int64_t vocab = 0;          // the model's vocab_size; 0: no model (nothing to check against)
  std::string vocab_origin;   // where it came from ("vocab_size of /models/x/config.json")
};

// The source for target replica `replica` of `replicas`, feeding `target`. Errors name the
// key and where the section came from ("job.toml:14: key 'max_tokens': must be positive,
// got 0"); an out-of-vocab id names the file and line (JSONL) or document (binary set).
Result<std::unique_ptr<BatchSource>> MakeBatchSource(const ConfigValue& section, int replica,
                                                     int replicas, int64_t seed,
                                                     const SourceTarget& target = {});

}  // namespace tandem::data
