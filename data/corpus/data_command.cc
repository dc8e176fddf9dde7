#include "data/corpus/data_command.h"

#include <algorithm>
#include <filesystem>
#include <iostream>

#include <fmt/format.h>

#include "data/corpus/sharded_set.h"

namespace tandem::data {
namespace {

// `tandem data --vocab`: the first document with an id not below `vocab` is an error.
Status CheckWholeCorpus(const Corpus& corpus, int64_t vocab) {
  if (vocab <= 0 || int64_t{corpus.vocab_bound()} <= vocab) return Status::Ok();
  for (int64_t d = 0; d < corpus.documents(); ++d) {
    if (std::optional<OutOfVocab> bad = FindOutOfVocab(corpus, d, vocab)) {
      return InvalidArgumentError("{}", DescribeOutOfVocab(corpus, *bad, vocab, ""));
    }
  }
  return Status::Ok();
}

}  // namespace

Result<Corpus> LoadCorpus(const std::string& path, const LoadOptions& options) {
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) {
    return ReadJsonl(path, JsonlOptions{.vocab = options.vocab, .skip_bad = options.skip_bad,
                                        .vocab_origin = options.vocab_origin});
  }
  if (IsShardedSet(path)) return OpenShardedSet(path, options.check);
  if (!IsBinarySet(path)) {
    return InvalidArgumentError(
        "directory '{}' is not a binary data set (no header file, no shards.json)", path);
  }
  return OpenBinary(path, options.check);
}

Status RunDataCommand(const DataCommandOptions& options) {
  std::ostream& out = options.out != nullptr ? *options.out : std::cout;
  if (options.input.empty()) return InvalidArgumentError("tandem data: no input given");
  if (!options.output.empty() && std::filesystem::is_directory(options.input)) {
    return InvalidArgumentError("tandem data: {} is already a binary set; give a .jsonl input "
                                "to convert, or no output to validate it",
                                options.input);
  }
  if (options.vocab < 0) {
    return InvalidArgumentError("tandem data: --vocab must be >= 0, got {}", options.vocab);
  }
  if (!options.output.empty()) RETURN_IF_ERROR(CheckDataSetOutput(options.output));
  ASSIGN_OR_RETURN(Corpus corpus,
                   LoadCorpus(options.input, LoadOptions{.vocab = options.vocab,
                                                         .skip_bad = options.skip_bad,
                                                         .check = BinaryCheck::kFull}));
  RETURN_IF_ERROR(CheckWholeCorpus(corpus, options.vocab));
  uint64_t shortest = UINT64_MAX, longest = 0;
  for (int64_t i = 0; i < corpus.documents(); ++i) {
    const uint64_t len = corpus.doc(i).ids.size();
    shortest = std::min(shortest, len);
    longest = std::max(longest, len);
  }
  out << corpus.Summary() << "\n";
  if (corpus.documents() > 0) {
    out << fmt::format("document length: min {}, mean {:.1f}, max {}\n", shortest,
                       double(corpus.tokens()) / double(corpus.documents()), longest);
  }
  out << corpus.skips().ToString() << "\n";
  if (options.output.empty()) return Status::Ok();

  RETURN_IF_ERROR(WriteBinary(corpus, options.output));
  ASSIGN_OR_RETURN(Corpus written, OpenBinary(options.output, BinaryCheck::kFull));
  if (written.documents() != corpus.documents() || written.tokens() != corpus.tokens()) {
    return DataLossError("{}: reads back {} documents and {} tokens, wrote {} and {}",
                         options.output, written.documents(), written.tokens(),
                         corpus.documents(), corpus.tokens());
  }
  out << "wrote " << written.Summary() << "\n";
  return Status::Ok();
}

}  // namespace tandem::data
