// Opening a data input of any format (a pre-tokenized .jsonl file, a binary set, a sharded
// set; docs/data-format.md) as one Corpus, and the library behind `tandem data` for
// pre-tokenized input: convert JSONL to a binary set, validate, count.
//
//   ASSIGN_OR_RETURN(Corpus c, LoadCorpus("train.jsonl", {.vocab = 151936}));
//
// Thread-safety: free functions; RunDataCommand writes to the stream it is given.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "data/corpus/corpus.h"

namespace tandem::data {

struct LoadOptions {
  int64_t vocab = 0;          // JSONL: every id must be below it (0: unchecked)
  std::string vocab_origin{};  // where `vocab` came from, for messages ("" for the caller's own)
  bool skip_bad = false;      // JSONL: count and skip bad records instead of failing
  BinaryCheck check = BinaryCheck::kStructure;  // binary and sharded sets
};

// A .jsonl file (ids checked against `vocab` as it is read), a binary set or a sharded set
// (whose ids the caller checks: the packer, or RunDataCommand). InvalidArgument for a
// directory that is neither set, naming it.
Result<Corpus> LoadCorpus(const std::string& path, const LoadOptions& options);

struct DataCommandOptions {
  std::string input;         // .jsonl file or binary set directory
  std::string output{};      // binary set directory to write; empty: only validate and count
  int64_t vocab = 0;         // > 0: every id must be below it
  bool skip_bad = false;     // JSONL: count and skip bad records instead of failing
  std::ostream* out = nullptr;  // where counts are printed; nullptr: std::cout
};

// Converts JSONL to a binary set (when `output` is set), validates the result (or the input
// binary set) fully, and prints document, token and skip counts.
Status RunDataCommand(const DataCommandOptions& options);

}  // namespace tandem::data
