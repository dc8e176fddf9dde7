#include "models/io/safetensors_writer.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "models/io/file_util.h"
#include "models/io/safetensors.h"

namespace tandem::models {
namespace {

using json = nlohmann::ordered_json;

Status CheckTensors(const std::string& path, std::span<const TensorToWrite> tensors) {
  std::set<std::string_view> names;
  for (const TensorToWrite& t : tensors) {
    if (t.name.empty() || t.name == "__metadata__") {
      return InvalidArgumentError("{}: bad tensor name '{}'", path, t.name);
    }
    if (!names.insert(t.name).second) {
      return InvalidArgumentError("{}: tensor '{}' given twice", path, t.name);
    }
    int64_t numel = 1;
    for (int64_t d : t.shape) {
      if (d < 0) return InvalidArgumentError("{}: tensor '{}' has a negative dimension", path, t.name);
      numel *= d;
    }
    const int64_t want = numel * kernels::DTypeSize(t.dtype);
    if (static_cast<int64_t>(t.data.size()) != want) {
      return InvalidArgumentError("{}: tensor '{}' has {} bytes, its dtype and shape need {}",
                                  path, t.name, t.data.size(), want);
    }
  }
  return Status::Ok();
}

// HF order: larger dtypes first, then by name; keeps every tensor aligned to its dtype.
std::vector<const TensorToWrite*> FileOrder(std::span<const TensorToWrite> tensors) {
  std::vector<const TensorToWrite*> order;
  for (const TensorToWrite& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](const TensorToWrite* a, const TensorToWrite* b) {
    const int64_t sa = kernels::DTypeSize(a->dtype), sb = kernels::DTypeSize(b->dtype);
    return sa != sb ? sa > sb : a->name < b->name;
  });
  return order;
}

SafetensorsBytes SerializeOrdered(const std::vector<const TensorToWrite*>& order,
                                  const SafetensorsMetadata& metadata) {
  json header = json::object();
  if (!metadata.empty()) {
    json md = json::object();
    for (const auto& [k, v] : metadata) md[k] = v;
    header["__metadata__"] = std::move(md);
  }
  int64_t offset = 0;
  for (const TensorToWrite* t : order) {
    const int64_t end = offset + static_cast<int64_t>(t->data.size());
    header[t->name] = {{"dtype", std::string(SafetensorsDTypeName(t->dtype))},
                       {"shape", t->shape},
                       {"data_offsets", {offset, end}}};
    offset = end;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  SafetensorsBytes out;
  for (int i = 0; i < 8; ++i)
    out.header.push_back(static_cast<char>(uint64_t{text.size()} >> (8 * i)));
  out.header += text;
  for (const TensorToWrite* t : order) out.data.push_back(t->data);
  return out;
}

Status WriteOrdered(const std::string& path, const std::vector<const TensorToWrite*>& order,
                    const SafetensorsMetadata& metadata) {
  const SafetensorsBytes bytes = SerializeOrdered(order, metadata);
  ASSIGN_OR_RETURN(AtomicFileWriter w, AtomicFileWriter::Create(path));
  RETURN_IF_ERROR(w.Append(bytes.header));
  for (std::span<const std::byte> d : bytes.data) RETURN_IF_ERROR(w.Append(d));
  return w.Commit();
}

}  // namespace

Status WriteSafetensors(const std::string& path, std::span<const TensorToWrite> tensors,
                        const SafetensorsMetadata& metadata) {
  RETURN_IF_ERROR(CheckTensors(path, tensors));
  return WriteOrdered(path, FileOrder(tensors), metadata);
}

Result<SafetensorsBytes> SerializeSafetensors(const std::string& path,
                                              std::span<const TensorToWrite> tensors,
                                              const SafetensorsMetadata& metadata) {
  RETURN_IF_ERROR(CheckTensors(path, tensors));
  return SerializeOrdered(FileOrder(tensors), metadata);
}

Result<std::vector<std::string>> WriteShardedSafetensors(const std::string& dir,
                                                         std::span<const TensorToWrite> tensors,
                                                         int64_t max_shard_bytes,
                                                         const SafetensorsMetadata& metadata) {
  namespace fs = std::filesystem;
  if (max_shard_bytes <= 0) {
    return InvalidArgumentError("{}: shard size limit must be positive, got {}", dir,
                                max_shard_bytes);
  }
  RETURN_IF_ERROR(CheckTensors(dir, tensors));
  std::vector<std::vector<const TensorToWrite*>> shards(1);
  int64_t in_shard = 0, total = 0;
  for (const TensorToWrite* t : FileOrder(tensors)) {
    const int64_t n = static_cast<int64_t>(t->data.size());
    if (in_shard > 0 && in_shard + n > max_shard_bytes) {
      shards.emplace_back();
      in_shard = 0;
    }
    shards.back().push_back(t);
    in_shard += n;
    total += n;
  }
  std::vector<std::string> written;
  if (shards.size() == 1) {
    std::string path = (fs::path(dir) / "model.safetensors").string();
    RETURN_IF_ERROR(WriteOrdered(path, shards[0], metadata));
    written.push_back(path);
    return written;
  }
  SafetensorsMetadata shard_metadata = {{"format", "pt"}};
  json weight_map = json::object();
  const size_t n = shards.size();
  std::vector<std::pair<std::string, std::string>> entries;
  for (size_t i = 0; i < n; ++i) {
    std::string name = fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, n);
    std::string path = (fs::path(dir) / name).string();
    RETURN_IF_ERROR(WriteOrdered(path, shards[i], shard_metadata));
    written.push_back(path);
    for (const TensorToWrite* t : shards[i]) entries.emplace_back(t->name, name);
  }
  std::sort(entries.begin(), entries.end());
  for (const auto& [tensor, file] : entries) weight_map[tensor] = file;
  json md = json::object();
  md["total_size"] = total;
  for (const auto& [k, v] : metadata) md[k] = v;
  json index = {{"metadata", std::move(md)}, {"weight_map", std::move(weight_map)}};
  std::string index_path = (fs::path(dir) / "model.safetensors.index.json").string();
  RETURN_IF_ERROR(WriteFileAtomically(index_path, index.dump(2) + "\n"));
  written.push_back(index_path);
  return written;
}

}  // namespace tandem::models
