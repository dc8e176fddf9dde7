#include "models/io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "runtime/core/json_parse.h"

namespace tandem::models {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr std::string_view kIndexName = "model.safetensors.index.json";
constexpr std::string_view kSingleName = "model.safetensors";

// A JSON integer that fits int64 and is >= 0, or -1.
int64_t NonNegativeInt(const json& v) {
  if (v.is_number_unsigned()) {
    uint64_t u = v.get<uint64_t>();
    return u > static_cast<uint64_t>(INT64_MAX) ? -1 : static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) {
    int64_t i = v.get<int64_t>();
    return i < 0 ? -1 : i;
  }
  return -1;
}

// Parses JSON, rejecting duplicate keys at the top level (nlohmann would keep the last one
// silently, hiding a second entry for the same tensor).
Result<json> ParseJsonObject(std::string_view text, const std::string& where) {
  if (Status deep = CheckJsonDepth(text, where); !deep.ok())
    return Status(StatusCode::kDataLoss, deep.message());
  std::set<std::string> keys;
  std::string duplicate;
  auto cb = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key) {
      std::string k = parsed.get<std::string>();
      if (!keys.insert(k).second && duplicate.empty()) duplicate = k;
    }
    return true;
  };
  json j = json::parse(text.begin(), text.end(), cb, /*allow_exceptions=*/false);
  if (j.is_discarded()) return DataLossError("{}: header is not valid JSON", where);
  if (!j.is_object()) return DataLossError("{}: header is not a JSON object", where);
  if (!duplicate.empty()) return DataLossError("{}: key '{}' appears twice", where, duplicate);
  return j;
}

// Validates one header entry into `t` (offsets still relative to the data region).
Status ParseEntry(const std::string& file, const std::string& name, const json& v,
                  int64_t data_size, TensorInfo* t) {
  auto where = [&] { return fmt::format("{}: tensor '{}'", file, name); };
  if (name.empty()) return DataLossError("{}: a tensor has an empty name", file);
  if (!v.is_object()) return DataLossError("{}: entry is not an object", where());
  for (const auto& [k, unused] : v.items()) {
    if (k != "dtype" && k != "shape" && k != "data_offsets") {
      return DataLossError("{}: unknown field '{}'", where(), k);
    }
  }
  auto dt = v.find("dtype");
  auto sh = v.find("shape");
  auto off = v.find("data_offsets");
  if (dt == v.end() || !dt->is_string()) {
    return DataLossError("{}: missing or non-string 'dtype'", where());
  }
  auto dtype = ParseSafetensorsDType(dt->get<std::string>());
  if (!dtype.ok()) return dtype.status().WithContext(where());
  t->name = name;
  t->dtype = *dtype;
  if (sh == v.end() || !sh->is_array()) {
    return DataLossError("{}: missing or non-array 'shape'", where());
  }
  t->shape.clear();
  int64_t numel = 1;
  for (const json& d : *sh) {
    int64_t n = NonNegativeInt(d);
    if (n < 0) return DataLossError("{}: shape {} has a bad dimension", where(), DescribeJson(*sh));
    if (__builtin_mul_overflow(numel, n, &numel)) {
      return DataLossError("{}: shape {} overflows", where(), DescribeJson(*sh));
    }
    t->shape.push_back(n);
  }
  if (off == v.end() || !off->is_array() || off->size() != 2) {
    return DataLossError("{}: 'data_offsets' must be [begin, end]", where());
  }
  int64_t b = NonNegativeInt((*off)[0]);
  int64_t e = NonNegativeInt((*off)[1]);
  if (b < 0 || e < 0 || e < b) {
    return DataLossError("{}: bad data_offsets {}", where(), DescribeJson(*off));
  }
  int64_t want;
  if (__builtin_mul_overflow(numel, kernels::DTypeSize(t->dtype), &want)) {
    return DataLossError("{}: shape {} of {} needs more than 2^63 bytes", where(), DescribeJson(*sh),
                         dt->get<std::string>());
  }
  if (want != e - b) {
    return DataLossError("{}: shape {} of {} needs {} bytes but data_offsets {} hold {}", where(),
                         DescribeJson(*sh), dt->get<std::string>(), want, DescribeJson(*off), e - b);
  }
  if (e > data_size) {
    return DataLossError("{}: data_offsets {} run past the end of the data ({} bytes; "
                         "file truncated?)", where(), DescribeJson(*off), data_size);
  }
  t->begin = b;
  t->end = e;
  return Status::Ok();
}

// No two non-empty tensors may share a byte. `ts` is sorted by begin.
Status CheckDisjoint(const std::string& file, const std::vector<TensorInfo>& ts) {
  const TensorInfo* last = nullptr;
  for (const TensorInfo& t : ts) {
    if (t.nbytes() == 0) continue;
    if (last != nullptr && t.begin < last->end) {
      return DataLossError("{}: tensor '{}' overlaps tensor '{}'", file, t.name, last->name);
    }
    if (last == nullptr || t.end > last->end) last = &t;
  }
  return Status::Ok();
}

// Shard names in an index must stay inside the index's directory.
bool SafeRelativeName(const std::string& name) {
  if (name.empty() || name.front() == '/') return false;
  for (const auto& part : fs::path(name)) {
    if (part == "..") return false;
  }
  return true;
}

}  // namespace

Result<DType> ParseSafetensorsDType(std::string_view name) {
  if (name == "BF16") return DType::kBF16;
  if (name == "F16") return DType::kF16;
  if (name == "F32") return DType::kF32;
  if (name == "I32") return DType::kI32;
  if (name == "I64") return DType::kI64;
  if (name == "U8") return DType::kU8;
  if (name == "F8_E4M3") return DType::kF8E4M3;
  if (name == "F8_E5M2") return DType::kF8E5M2;
  return InvalidArgumentError(
      "unsupported dtype '{}' (tandem reads BF16, F16, F32, I32, I64, U8, F8_E4M3, F8_E5M2)",
      name);
}

std::string_view SafetensorsDTypeName(DType dtype) {
  switch (dtype) {
    case DType::kBF16: return "BF16";
    case DType::kF16: return "F16";
    case DType::kF32: return "F32";
    case DType::kI32: return "I32";
    case DType::kI64: return "I64";
    case DType::kU8: return "U8";
    case DType::kF8E4M3: return "F8_E4M3";
    case DType::kF8E5M2: return "F8_E5M2";
  }
  return "?";
}

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

Status SafetensorsReader::AddFile(const std::string& path, std::vector<TensorInfo>* out) {
  ASSIGN_OR_RETURN(MappedFile map, MappedFile::Open(path));
  auto bytes = map.bytes();
  const uint64_t size = bytes.size();
  if (size < 8) return DataLossError("{}: {} bytes is too short for a safetensors file", path, size);
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = header_len << 8 | static_cast<uint8_t>(bytes[i]);
  if (header_len > kMaxSafetensorsHeaderBytes) {
    return DataLossError("{}: header length {} exceeds the {} byte limit (not a safetensors "
                         "file?)", path, header_len, kMaxSafetensorsHeaderBytes);
  }
  if (header_len > size - 8) {
    return DataLossError("{}: header length {} runs past the end of the {} byte file "
                         "(truncated?)", path, header_len, size);
  }
  std::string_view text(reinterpret_cast<const char*>(bytes.data()) + 8, header_len);
  ASSIGN_OR_RETURN(json header, ParseJsonObject(text, path));
  const int64_t data_start = static_cast<int64_t>(8 + header_len);
  const int64_t data_size = static_cast<int64_t>(size) - data_start;
  const int file_index = static_cast<int>(file_paths_.size());
  std::vector<TensorInfo> ts;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      if (!v.is_object()) return DataLossError("{}: __metadata__ is not an object", path);
      for (const auto& [k, s] : v.items()) {
        if (!s.is_string()) {
          return DataLossError("{}: __metadata__ value '{}' is not a string", path, k);
        }
        if (file_index == 0) metadata_[k] = s.get<std::string>();
      }
      continue;
    }
    TensorInfo t;
    RETURN_IF_ERROR(ParseEntry(path, name, v, data_size, &t));
    t.file_index = file_index;
    ts.push_back(std::move(t));
  }
  std::sort(ts.begin(), ts.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  RETURN_IF_ERROR(CheckDisjoint(path, ts));
  for (TensorInfo& t : ts) {
    t.begin += data_start;
    t.end += data_start;
    out->push_back(std::move(t));
  }
  file_paths_.push_back(path);
  maps_.push_back(std::move(map));
  return Status::Ok();
}

Status SafetensorsReader::LoadIndex(const std::string& index_path) {
  ASSIGN_OR_RETURN(std::string text, ReadTextFile(index_path));
  ASSIGN_OR_RETURN(json index, ParseJsonObject(text, index_path));
  auto wm = index.find("weight_map");
  if (wm == index.end() || !wm->is_object() || wm->empty()) {
    return DataLossError("{}: missing or empty 'weight_map'", index_path);
  }
  std::map<std::string, std::string> metadata;
  if (auto md = index.find("metadata"); md != index.end() && !md->is_null()) {
    if (!md->is_object()) return DataLossError("{}: 'metadata' is not an object", index_path);
    for (const auto& [k, v] : md->items()) {
      metadata[k] = v.is_string() ? v.get<std::string>() : v.dump();
    }
  }
  // Shard -> one tensor it should hold (for messages), in sorted shard order.
  std::map<std::string, std::string> shards;
  for (const auto& [name, file] : wm->items()) {
    if (!file.is_string() || !SafeRelativeName(file.get<std::string>())) {
      return DataLossError("{}: weight_map entry for tensor '{}' is not a file name in the "
                           "index's directory", index_path, name);
    }
    shards.emplace(file.get<std::string>(), name);
  }
  const fs::path dir = fs::path(index_path).parent_path();
  std::vector<TensorInfo> all;
  std::map<std::string, int> index_of_shard;
  for (const auto& [shard, example] : shards) {
    const std::string path = (dir / shard).string();
    std::error_code ec;  // the throwing overload aborted on a shard name too long for a path
    if (!fs::exists(path, ec)) {
      return NotFoundError("{}: shard '{}' (holding tensor '{}') does not exist", index_path,
                           path, example);
    }
    index_of_shard[shard] = static_cast<int>(file_paths_.size());
    RETURN_IF_ERROR(AddFile(path, &all));
  }
  std::set<std::string> found;
  for (const TensorInfo& t : all) {
    auto it = wm->find(t.name);
    if (it == wm->end()) {
      return DataLossError("{}: tensor '{}' is not listed in {}", file_paths_[t.file_index], t.name,
                           index_path);
    }
    if (index_of_shard.at(it->get<std::string>()) != t.file_index) {
      return DataLossError("{}: tensor '{}' is mapped to '{}' by {}", file_paths_[t.file_index],
                           t.name, it->get<std::string>(), index_path);
    }
    found.insert(t.name);
  }
  for (const auto& [name, file] : wm->items()) {
    if (!found.contains(name)) {
      return DataLossError("{}: tensor '{}' is mapped to {} which does not contain it",
                           index_path, name, (dir / file.get<std::string>()).string());
    }
  }
  tensors_ = std::move(all);
  metadata_ = std::move(metadata);  // the index's, not the first shard's
  return Status::Ok();
}

Result<SafetensorsReader> SafetensorsReader::Open(const std::string& path) {
  SafetensorsReader r;
  std::string target = path;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    fs::path dir(path);
    if (fs::exists(dir / kIndexName, ec)) {
      target = (dir / kIndexName).string();
    } else if (fs::exists(dir / kSingleName, ec)) {
      target = (dir / kSingleName).string();
    } else {
      return NotFoundError("{}: no {} or {} in this directory", path, kIndexName, kSingleName);
    }
  }
  if (target.ends_with(".index.json")) {
    RETURN_IF_ERROR(r.LoadIndex(target));
  } else {
    RETURN_IF_ERROR(r.AddFile(target, &r.tensors_));
  }
  r.BuildLookup();
  return r;
}

void SafetensorsReader::BuildLookup() {
  std::stable_sort(tensors_.begin(), tensors_.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.file_index != b.file_index ? a.file_index < b.file_index : a.begin < b.begin;
  });
  by_name_.clear();
  for (size_t i = 0; i < tensors_.size(); ++i) by_name_[tensors_[i].name] = i;
}

const TensorInfo* SafetensorsReader::Find(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

Result<const TensorInfo*> SafetensorsReader::Get(std::string_view name) const {
  const TensorInfo* t = Find(name);
  if (t == nullptr) {
    return NotFoundError("tensor '{}' is not in {}", name,
                         file_paths_.size() == 1 ? file_paths_[0] : "the checkpoint's shards");
  }
  return t;
}

std::span<const std::byte> SafetensorsReader::Bytes(const TensorInfo& t) const {
  TANDEM_CHECK(t.file_index >= 0 && t.file_index < static_cast<int>(maps_.size()));
  return maps_[t.file_index].bytes().subspan(t.begin, t.nbytes());
}

std::string SafetensorsReader::Where(const TensorInfo& t) const {
  return fmt::format("{}: tensor '{}'", file_paths_[t.file_index], t.name);
}

Status SafetensorsReader::Read(const TensorInfo& t, DType out, void* dst,
                               int64_t dst_bytes) const {
  const int64_t n = t.numel();
  if (dst_bytes != n * kernels::DTypeSize(out)) {
    return InvalidArgumentError("{}: {} elements as {} need {} bytes, buffer has {}", Where(t), n,
                                SafetensorsDTypeName(out), n * kernels::DTypeSize(out), dst_bytes);
  }
  if (!ConvertElements(t.dtype, Bytes(t).data(), out, dst, n)) {
    return InvalidArgumentError("{}: cannot convert {} to {}", Where(t),
                                SafetensorsDTypeName(t.dtype), SafetensorsDTypeName(out));
  }
  return Status::Ok();
}

Status SafetensorsReader::Read(std::string_view name, DType out, void* dst,
                               int64_t dst_bytes) const {
  ASSIGN_OR_RETURN(const TensorInfo* t, Get(name));
  return Read(*t, out, dst, dst_bytes);
}

Status SafetensorsReader::ForEachInFileOrder(const Visitor& fn) const {
  std::vector<size_t> order(tensors_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  return ForEachInOrder(order, fn);
}

Status SafetensorsReader::ForEachInOrder(std::span<const size_t> order, const Visitor& fn) const {
  for (size_t i : order)
    if (i >= tensors_.size())
      return InvalidArgumentError("SafetensorsReader: tensor index {} of {}", i, tensors_.size());
  for (size_t k = 0; k < order.size(); ++k) {
    const TensorInfo& t = tensors_[order[k]];
    if (k == 0) maps_[t.file_index].AdviseWillNeed(t.begin, t.nbytes());
    if (k + 1 < order.size()) {
      const TensorInfo& next = tensors_[order[k + 1]];
      maps_[next.file_index].AdviseWillNeed(next.begin, next.nbytes());
    }
    Status st = fn(t, Bytes(t));
    if (!st.ok()) return st.WithContext(Where(t));
  }
  return Status::Ok();
}

}  // namespace tandem::models
