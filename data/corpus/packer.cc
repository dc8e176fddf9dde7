#include "data/corpus/packer.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include <fmt/format.h>

#include "data/corpus/rng.h"

namespace tandem::data {

Result<std::unique_ptr<Packer>> Packer::Create(std::shared_ptr<const Corpus> corpus,
                                               PackerOptions options) {
  if (corpus == nullptr || corpus->documents() == 0) {
    return InvalidArgumentError("packer: the corpus{} has no documents",
                                corpus ? " " + corpus->source() : std::string());
  }
  if (corpus->documents() > int64_t{std::numeric_limits<uint32_t>::max()}) {
    return InvalidArgumentError("packer: {} documents, at most 2^32-1 supported",
                                corpus->documents());
  }
  if (options.max_tokens <= 0 || options.max_tokens > std::numeric_limits<int32_t>::max()) {
    return InvalidArgumentError("packer: max_tokens must be in [1, 2^31-1], got {}",
                                options.max_tokens);
  }
  if (options.epochs < 0) {
    return InvalidArgumentError("packer: epochs must be >= 0 (0 = forever), got {}",
                                options.epochs);
  }
  if (options.replicas < 1 || options.replica < 0 || options.replica >= options.replicas) {
    return InvalidArgumentError("packer: replica {} of {} is out of range", options.replica,
                                options.replicas);
  }
  if (options.vocab < 0) {
    return InvalidArgumentError("packer: vocab must be >= 0, got {}", options.vocab);
  }
  auto p = std::unique_ptr<Packer>(new Packer(std::move(corpus), options));
  RETURN_IF_ERROR(p->ExcludeOutOfVocab());
  p->PlanEpoch(0);
  RETURN_IF_ERROR(p->CheckEnoughBatches());
  return p;
}

// Ids are handed out as int32: without a vocab, 2^31 bounds them (a binary set may hold any
// uint32).
constexpr int64_t kInt32Ids = int64_t{1} << 31;

int64_t Packer::IdLimit() const {
  return opt_.vocab > 0 && opt_.vocab < kInt32Ids ? opt_.vocab : kInt32Ids;
}

std::string Packer::IdLimitOrigin() const {
  return IdLimit() == opt_.vocab ? opt_.vocab_origin : std::string("token ids are int32");
}

Status Packer::ExcludeOutOfVocab() {
  const int64_t limit = IdLimit();
  if (int64_t{corpus_->vocab_bound()} <= limit) return Status::Ok();
  const int64_t n = corpus_->documents();
  int64_t kept = 0;
  for (int64_t d = 0; d < n; ++d) {
    std::optional<OutOfVocab> bad = FindOutOfVocab(*corpus_, d, limit);
    if (!bad) {
      ++kept;
      continue;
    }
    const std::string message = DescribeOutOfVocab(*corpus_, *bad, limit, IdLimitOrigin());
    if (!opt_.skip_bad) {
      return InvalidArgumentError("{} (set skip_bad to count and skip such documents)", message);
    }
    if (excluded_.empty()) excluded_.assign(static_cast<size_t>(n), false);
    excluded_[static_cast<size_t>(d)] = true;
    vocab_skips_.Add("id_out_of_range", message);
  }
  if (kept == 0) {
    return InvalidArgumentError("{}: every document holds an id not below vocab {}; {}",
                                corpus_->source(), limit, vocab_skips_.ToString());
  }
  return Status::Ok();
}

void Packer::PlanEpoch(int64_t epoch) {
  if (planned_epoch_ == epoch) return;
  const uint64_t n = static_cast<uint64_t>(corpus_->documents());
  std::vector<uint32_t> order(n);
  std::iota(order.begin(), order.end(), 0u);
  if (opt_.shuffle) {
    SplitMix64 rng(MixSeed(opt_.seed, static_cast<uint64_t>(epoch)));
    Shuffle(order, rng);
  }
  const uint64_t max = static_cast<uint64_t>(opt_.max_tokens);
  pieces_.clear();
  batch_starts_.clear();
  truncated_tokens_ = 0;
  split_documents_ = 0;
  uint64_t fill = 0;
  for (uint32_t d : order) {
    if (!excluded_.empty() && excluded_[d]) continue;
    const uint64_t len = corpus_->doc(d).ids.size();
    if (len > max) {
      if (opt_.long_documents == LongDocuments::kTruncate) {
        truncated_tokens_ += len - max;
      } else {
        ++split_documents_;
      }
    }
    const uint64_t kept = opt_.long_documents == LongDocuments::kTruncate ? std::min(len, max)
                                                                          : len;
    for (uint64_t b = 0; b < kept; b += max) {
      Piece piece{d, b, std::min(max, kept - b)};
      if (batch_starts_.empty() || fill + piece.len > max) {
        batch_starts_.push_back(pieces_.size());
        fill = 0;
      }
      fill += piece.len;
      pieces_.push_back(piece);
    }
  }
  batch_starts_.push_back(pieces_.size());
  planned_epoch_ = epoch;
}

int64_t Packer::GlobalBatches(int64_t epoch) {
  PlanEpoch(epoch);
  return static_cast<int64_t>(batch_starts_.size()) - 1;
}

int64_t Packer::ShardBatches() const {
  const int64_t global = static_cast<int64_t>(batch_starts_.size()) - 1;
  if (global <= opt_.replica) return 0;
  return (global - opt_.replica + opt_.replicas - 1) / opt_.replicas;
}

Status Packer::CheckEnoughBatches() const {
  const int64_t global = static_cast<int64_t>(batch_starts_.size()) - 1;
  if (global < opt_.replicas) {
    return InvalidArgumentError(
        "{}: epoch {} packs into {} batches of max_tokens {}, fewer than the {} target "
        "replicas; use more data, a smaller max_tokens or fewer replicas",
        corpus_->source(), planned_epoch_, global, opt_.max_tokens, opt_.replicas);
  }
  return Status::Ok();
}

Result<std::optional<TokenBatch>> Packer::Next() {
  while (opt_.epochs == 0 || pos_.epoch < opt_.epochs) {
    PlanEpoch(pos_.epoch);
    RETURN_IF_ERROR(CheckEnoughBatches());
    if (pos_.next_batch < ShardBatches()) {
      const int64_t global = opt_.replica + pos_.next_batch * opt_.replicas;
      ++pos_.next_batch;
      ASSIGN_OR_RETURN(TokenBatch batch, Build(global));
      return std::optional<TokenBatch>(std::move(batch));
    }
    ++pos_.epoch;
    pos_.next_batch = 0;
  }
  return std::optional<TokenBatch>();
}

Result<TokenBatch> Packer::Build(int64_t global_index) const {
  TokenBatch b;
  b.index = static_cast<uint64_t>(global_index);
  b.epoch = planned_epoch_;
  const uint64_t first = batch_starts_[global_index];
  const uint64_t last = batch_starts_[global_index + 1];
  uint64_t total = 0;
  for (uint64_t p = first; p < last; ++p) total += pieces_[p].len;
  b.input_ids.reserve(total);
  b.position_ids.reserve(total);
  b.loss_mask.reserve(total);
  b.cu_seqlens.reserve(last - first + 1);
  b.cu_seqlens.push_back(0);
  for (uint64_t p = first; p < last; ++p) {
    const Piece& piece = pieces_[p];
    const Document doc = corpus_->doc(static_cast<int64_t>(piece.doc));
    for (uint64_t t = piece.begin; t < piece.begin + piece.len; ++t) {
      if (int64_t{doc.ids[t]} >= IdLimit()) {
        return DataLossError("{} (the set's header claims every id is below {})",
                             DescribeOutOfVocab(*corpus_,
                                                {static_cast<int64_t>(piece.doc),
                                                 static_cast<int64_t>(t), doc.ids[t]},
                                                IdLimit(), IdLimitOrigin()),
                             corpus_->vocab_bound());
      }
      b.input_ids.push_back(static_cast<int32_t>(doc.ids[t]));
      b.position_ids.push_back(static_cast<int32_t>(t));
      const bool segment_start = t == piece.begin;
      const uint8_t m = doc.mask.empty() ? 1 : doc.mask[t];
      b.loss_mask.push_back(segment_start ? 0 : m);
    }
    b.cu_seqlens.push_back(static_cast<int32_t>(b.input_ids.size()));
    b.max_seqlen = std::max(b.max_seqlen, static_cast<int32_t>(piece.len));
  }
  return b;
}

Status Packer::Seek(const DataPosition& pos) {
  if (pos.epoch < 0 || pos.next_batch < 0 || (opt_.epochs > 0 && pos.epoch > opt_.epochs)) {
    return InvalidArgumentError("packer: cannot seek to epoch {} batch {} ({} epochs)",
                                pos.epoch, pos.next_batch, opt_.epochs);
  }
  if (opt_.epochs == 0 || pos.epoch < opt_.epochs) {
    PlanEpoch(pos.epoch);
    if (pos.next_batch > ShardBatches()) {
      return InvalidArgumentError(
          "packer: cannot seek to batch {} of epoch {}: replica {} of {} has only {} batches "
          "there (was the checkpoint made with other data, max_tokens, seed or replicas?)",
          pos.next_batch, pos.epoch, opt_.replica, opt_.replicas, ShardBatches());
    }
  } else if (pos.next_batch != 0) {
    return InvalidArgumentError("packer: cannot seek to batch {} of epoch {}, past the end",
                                pos.next_batch, pos.epoch);
  }
  pos_ = pos;
  return Status::Ok();
}

std::string Packer::Describe() const {
  std::string s = fmt::format(
      "{}; max_tokens {}, shuffle {}, epochs {}, replica {} of {}; epoch {}: {} batches "
      "({} for this replica)",
      corpus_->Summary(), opt_.max_tokens, opt_.shuffle ? "on" : "off",
      opt_.epochs == 0 ? std::string("forever") : std::to_string(opt_.epochs), opt_.replica,
      opt_.replicas, planned_epoch_, batch_starts_.size() - 1, ShardBatches());
  if (split_documents_ > 0) {
    s += fmt::format("; {} documents longer than max_tokens split into pieces",
                     split_documents_);
  }
  if (truncated_tokens_ > 0) {
    s += fmt::format("; {} tokens truncated from long documents per epoch", truncated_tokens_);
  }
  s += "; " + corpus_->skips().ToString();
  if (vocab_skips_.skipped > 0) {
    s += fmt::format("; vocab {}: {}", IdLimit(), vocab_skips_.ToString());
  }
  return s;
}

}  // namespace tandem::data
