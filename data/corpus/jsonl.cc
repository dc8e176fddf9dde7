// ReadJsonl (declared in corpus.h): the JSONL reader with per-line errors.
#include <cstdint>
#include <fstream>
#include <limits>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "data/corpus/corpus.h"
#include "runtime/core/json_parse.h"

namespace tandem::data {
namespace {

struct BadRecord {
  std::string reason;   // short key for the skip report
  std::string message;  // what is wrong, without the file:line prefix
};

struct Record {
  std::vector<uint32_t> ids;
  std::optional<std::vector<uint8_t>> mask;
};

std::string Kind(const nlohmann::json& v) { return v.type_name(); }

// Parses one non-blank line into `out`, or says what is wrong with it.
std::optional<BadRecord> ParseRecord(const std::string& line, int64_t vocab,
                                     const std::string& vocab_origin, Record& out) {
  Result<nlohmann::json> parsed = ParseJson(line, "not valid JSON");
  if (!parsed.ok()) return BadRecord{"not_json", parsed.status().message()};
  nlohmann::json j = std::move(*parsed);
  if (!j.is_object()) {
    return BadRecord{"not_object", fmt::format("expected a JSON object, got {}", Kind(j))};
  }
  auto ids = j.find("input_ids");
  if (ids == j.end()) {
    // The usual mix-up: a chat or text dataset given where token ids are read.
    for (const char* chat : {"messages", "conversations"})
      if (j.contains(chat))
        return BadRecord{"missing_input_ids",
                         fmt::format("no \"input_ids\" key; this is a chat record (\"{}\"): "
                                     "convert chat JSONL to token ids first with `tandem data "
                                     "FILE --model MODEL_DIR -o OUT_DIR` (docs/data-format.md)",
                                     chat)};
    if (j.contains("text"))
      return BadRecord{"missing_input_ids",
                       "no \"input_ids\" key; raw \"text\" is not read: tokenize it first "
                       "(docs/data-format.md)"};
    return BadRecord{"missing_input_ids", "no \"input_ids\" key"};
  }
  if (!ids->is_array()) {
    return BadRecord{"bad_input_ids",
                     fmt::format("\"input_ids\" must be an array, got {}", Kind(*ids))};
  }
  if (ids->empty()) return BadRecord{"empty", "\"input_ids\" is empty"};
  const int64_t limit = vocab > 0 ? vocab : int64_t{std::numeric_limits<int32_t>::max()} + 1;
  out.ids.clear();
  out.ids.reserve(ids->size());
  for (size_t i = 0; i < ids->size(); ++i) {
    const nlohmann::json& v = (*ids)[i];
    if (!v.is_number_integer()) {
      return BadRecord{"bad_id", fmt::format("input_ids[{}] = {} is not an integer", i,
                                             DescribeJson(v))};
    }
    if (v.is_number_unsigned() ? v.get<uint64_t>() >= uint64_t(limit) : v.get<int64_t>() >= limit) {
      return BadRecord{"id_out_of_range",
                       vocab > 0 ? fmt::format("input_ids[{}] = {} is not below vocab {}{}", i,
                                               DescribeJson(v), vocab,
                                               vocab_origin.empty() ? ""
                                                                    : " (" + vocab_origin + ")")
                                 : fmt::format("input_ids[{}] = {} does not fit int32", i,
                                               DescribeJson(v))};
    }
    if (!v.is_number_unsigned() && v.get<int64_t>() < 0) {
      return BadRecord{"id_out_of_range", fmt::format("input_ids[{}] = {} is negative", i,
                                                      DescribeJson(v))};
    }
    out.ids.push_back(static_cast<uint32_t>(v.get<int64_t>()));
  }
  out.mask.reset();
  auto mask = j.find("loss_mask");
  if (mask != j.end()) {
    if (!mask->is_array()) {
      return BadRecord{"bad_loss_mask",
                       fmt::format("\"loss_mask\" must be an array, got {}", Kind(*mask))};
    }
    if (mask->size() != ids->size()) {
      return BadRecord{"mask_length", fmt::format("\"loss_mask\" has {} entries, \"input_ids\" {}",
                                                  mask->size(), ids->size())};
    }
    std::vector<uint8_t> m;
    m.reserve(mask->size());
    for (size_t i = 0; i < mask->size(); ++i) {
      const nlohmann::json& v = (*mask)[i];
      if (v.is_boolean()) {
        m.push_back(v.get<bool>() ? 1 : 0);
      } else if (v.is_number_integer() && (v.get<int64_t>() == 0 || v.get<int64_t>() == 1)) {
        m.push_back(static_cast<uint8_t>(v.get<int64_t>()));
      } else {
        return BadRecord{"bad_loss_mask",
                         fmt::format("loss_mask[{}] = {} is not 0 or 1", i, DescribeJson(v))};
      }
    }
    out.mask = std::move(m);
  }
  return std::nullopt;
}

bool IsBlank(const std::string& line) {
  return line.find_first_not_of(" \t\r") == std::string::npos;
}

}  // namespace

Result<Corpus> ReadJsonl(const std::string& path, const JsonlOptions& options) {
  std::ifstream in(path);
  if (!in) return NotFoundError("{}: cannot open for reading", path);
  std::vector<uint32_t> tokens;
  std::vector<uint64_t> offsets = {0};
  std::vector<uint8_t> mask;
  std::optional<bool> with_mask;  // decided by the first kept record
  int64_t first_kept_line = 0;
  SkipReport skips;
  Record rec;
  std::string line;
  for (int64_t line_no = 1; std::getline(in, line); ++line_no) {
    if (IsBlank(line)) {
      ++skips.blank_lines;
      continue;
    }
    std::optional<BadRecord> bad = ParseRecord(line, options.vocab, options.vocab_origin, rec);
    if (!bad && with_mask.has_value() && *with_mask != rec.mask.has_value()) {
      bad = BadRecord{"mask_presence",
                      fmt::format("{} \"loss_mask\" but line {} {}",
                                  rec.mask ? "has a" : "has no", first_kept_line,
                                  *with_mask ? "has one (all records or none must)"
                                             : "has none (all records or none must)")};
    }
    if (bad) {
      std::string message = fmt::format("{}:{}: {}", path, line_no, bad->message);
      if (!options.skip_bad) {
        return InvalidArgumentError("{} (set skip_bad to count and skip bad records)", message);
      }
      skips.Add(bad->reason, message);
      continue;
    }
    if (!with_mask.has_value()) {
      with_mask = rec.mask.has_value();
      first_kept_line = line_no;
    }
    tokens.insert(tokens.end(), rec.ids.begin(), rec.ids.end());
    if (rec.mask) mask.insert(mask.end(), rec.mask->begin(), rec.mask->end());
    offsets.push_back(tokens.size());
  }
  if (in.bad()) return DataLossError("{}: read error", path);
  if (offsets.size() == 1) {
    return InvalidArgumentError("{}: no usable records{}", path,
                                skips.skipped > 0 ? "; " + skips.ToString() : "");
  }
  Corpus c = Corpus::FromVectors(std::move(tokens), std::move(offsets), std::move(mask), path);
  c.set_skips(std::move(skips));
  return c;
}

}  // namespace tandem::data
