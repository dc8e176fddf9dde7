#include "actors/data/source.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "data/corpus/data_command.h"
#include "data/corpus/packer.h"
#include "data/corpus/synthetic.h"

namespace tandem::data {
namespace {

constexpr const char* kSynthetic = "synthetic";

// "job.toml:14: key 'max_tokens': <message>", using the value's own location if known.
Status KeyError(const ConfigValue& section, std::string_view key, const std::string& message) {
  const ConfigValue* v = section.Find(key);
  std::string loc = v != nullptr && !v->location().empty() ? v->location() : section.location();
  return InvalidArgumentError("{}key '{}': {}", loc.empty() ? "" : loc + ": ", key, message);
}

// `st` with the key and location in front; keeps its code (DataLoss stays DataLoss).
Status KeyContext(const ConfigValue& section, std::string_view key, const Status& st) {
  Status prefixed = KeyError(section, key, st.message());
  return Status(st.code(), prefixed.message());
}

Result<int64_t> PositiveInt(const ConfigValue& section, std::string_view key, int64_t fallback) {
  ASSIGN_OR_RETURN(int64_t v, section.GetInt(key, fallback));
  if (v <= 0) return KeyError(section, key, fmt::format("must be positive, got {}", v));
  return v;
}

// The `vocab` key checked against the model's: the key if given (not above the model's),
// else the model's (0 when neither is known).
struct Vocab {
  int64_t size = 0;
  std::string origin;  // for messages; "" for the job's own key
};

Result<Vocab> ResolveVocab(const ConfigValue& section, const SourceTarget& target,
                           int64_t fallback) {
  if (target.vocab < 0) {
    return InvalidArgumentError("data source: the target's vocab_size is {}", target.vocab);
  }
  const std::string model = target.vocab_origin.empty() ? std::string("the target model's vocab_size")
                                                        : target.vocab_origin;
  if (section.Find("vocab") == nullptr) {
    if (target.vocab > 0) return Vocab{target.vocab, model};
    return Vocab{fallback, ""};
  }
  ASSIGN_OR_RETURN(int64_t v, section.GetInt("vocab", 0));
  if (v < 0) return KeyError(section, "vocab", fmt::format("must be >= 0, got {}", v));
  if (target.vocab > 0 && v > target.vocab) {
    return KeyError(section, "vocab",
                    fmt::format("{} is above the model's vocab_size {} ({}): ids up to {} would "
                                "have no embedding row; leave it out to use the model's",
                                v, target.vocab, model, v - 1));
  }
  if (v == 0 && target.vocab > 0) return Vocab{target.vocab, model};
  return Vocab{v, ""};
}

Result<std::unique_ptr<BatchSource>> MakeSynthetic(const ConfigValue& section, int replica,
                                                   int replicas, int64_t seed, int64_t epochs,
                                                   const SourceTarget& target) {
  SyntheticOptions o;
  o.seed = static_cast<uint64_t>(seed);
  o.replica = replica;
  o.replicas = replicas;
  o.epochs = epochs;
  ASSIGN_OR_RETURN(o.max_tokens, PositiveInt(section, "max_tokens", 1024));
  ASSIGN_OR_RETURN(Vocab vocab, ResolveVocab(section, target, 256));
  if (vocab.size <= 0) return KeyError(section, "vocab", "must be positive for synthetic data");
  o.vocab = vocab.size;
  ASSIGN_OR_RETURN(o.batches_per_epoch, PositiveInt(section, "batches_per_epoch", 100));
  o.min_doc_len = std::min<int64_t>(16, o.max_tokens);
  o.max_doc_len = std::min<int64_t>(128, o.max_tokens);
  if (const ConfigValue* len = section.Find("doc_len"); len != nullptr) {
    if (len->is_array()) {
      if (len->array().size() != 2) {
        return KeyError(section, "doc_len", "expected [min, max] or one integer");
      }
      auto lo = len->array()[0].AsInt();
      auto hi = len->array()[1].AsInt();
      if (!lo.ok() || !hi.ok()) {
        return KeyError(section, "doc_len", "expected [min, max] integers");
      }
      o.min_doc_len = *lo;
      o.max_doc_len = *hi;
    } else {
      auto one = len->AsInt();
      if (!one.ok()) return KeyError(section, "doc_len", "expected [min, max] or one integer");
      o.min_doc_len = o.max_doc_len = *one;
    }
  }
  auto src = SyntheticSource::Create(o);
  if (!src.ok()) return KeyContext(section, "data", src.status());
  return std::unique_ptr<BatchSource>(std::move(src).value());
}

}  // namespace

Result<std::unique_ptr<BatchSource>> MakeBatchSource(const ConfigValue& section, int replica,
                                                     int replicas, int64_t seed,
                                                     const SourceTarget& target) {
  ASSIGN_OR_RETURN(std::string path, section.RequireString("data"));
  ASSIGN_OR_RETURN(int64_t epochs, section.GetInt("epochs", 1));
  if (epochs < 0) {
    return KeyError(section, "epochs", fmt::format("must be >= 0 (0 = forever), got {}", epochs));
  }
  if (path == kSynthetic) {
    return MakeSynthetic(section, replica, replicas, seed, epochs, target);
  }

  PackerOptions o;
  o.seed = static_cast<uint64_t>(seed);
  o.replica = replica;
  o.replicas = replicas;
  o.epochs = epochs;
  ASSIGN_OR_RETURN(o.max_tokens, PositiveInt(section, "max_tokens", 16384));
  ASSIGN_OR_RETURN(o.shuffle, section.GetBool("shuffle", true));
  ASSIGN_OR_RETURN(Vocab vocab, ResolveVocab(section, target, 0));
  ASSIGN_OR_RETURN(bool skip_bad, section.GetBool("skip_bad", false));
  o.vocab = vocab.size;
  o.skip_bad = skip_bad;
  o.vocab_origin = vocab.origin;
  ASSIGN_OR_RETURN(std::string long_docs, section.GetString("long_documents", "split"));
  if (long_docs == "truncate") {
    o.long_documents = LongDocuments::kTruncate;
  } else if (long_docs != "split") {
    return KeyError(section, "long_documents",
                    fmt::format("expected \"split\" or \"truncate\", got \"{}\"", long_docs));
  }

  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return KeyError(section, "data",
                    fmt::format("'{}' does not exist (give a .jsonl file, a binary set "
                                "directory made by `tandem data`, or \"synthetic\")",
                                path));
  }
  Result<Corpus> corpus = LoadCorpus(path, LoadOptions{.vocab = vocab.size,
                                                      .vocab_origin = vocab.origin,
                                                      .skip_bad = skip_bad,
                                                      .check = BinaryCheck::kStructure});
  if (!corpus.ok()) return KeyContext(section, "data", corpus.status());
  auto shared = std::make_shared<const Corpus>(std::move(corpus).value());
  auto packer = Packer::Create(std::move(shared), o);
  if (!packer.ok()) return KeyContext(section, "data", packer.status());
  return std::unique_ptr<BatchSource>(std::move(packer).value());
}

}  // namespace tandem::data
