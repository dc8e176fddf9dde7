// A sharded binary set (docs/data-format.md): a directory holding shard-00000/,
// shard-00001/, ... (each a binary set of version 1) and `shards.json`, the manifest that
// lists them in order. It is what a long conversion writes: each shard is written under a
// temporary name and renamed, then the manifest is replaced atomically (written to a
// temporary file and renamed), so after a kill at any point the manifest lists exactly the
// shards that are complete, and a resumed writer continues after the last of them. The
// manifest also carries the producer's resume state as opaque JSON text (for `tandem data`:
// where in the input the last shard ended, and the counts so far).
//
//   ASSIGN_OR_RETURN(ShardedSetWriter w, ShardedSetWriter::Create("train.tdata"));
//   RETURN_IF_ERROR(w.AddShard(shard_corpus, state_json));   // repeated
//   RETURN_IF_ERROR(w.Finish(state_json));
//   ASSIGN_OR_RETURN(Corpus all, OpenShardedSet("train.tdata", BinaryCheck::kStructure));
//
// Thread-safety: a writer is used by one thread; no two writers may share a directory
// (not checked: one conversion per output directory).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "data/corpus/corpus.h"

namespace tandem::data {

struct ShardEntry {
  std::string name;  // directory inside the set, e.g. "shard-00003"
  int64_t documents = 0;
  int64_t tokens = 0;
};

struct ShardManifest {
  bool complete = false;              // the producer finished; only then may it be trained on
  std::vector<ShardEntry> shards;     // in order
  std::string producer_state = "{}";  // JSON text, the producer's own
};

// True when `path` is a directory holding a `shards.json`.
bool IsShardedSet(const std::string& path);

// Whether a data set may be written to `dir`: it does not exist, is an empty directory, or
// holds a tandem data set (a sharded set's manifest, or a binary set's header with its
// magic), which the writer may replace. Anything else is InvalidArgument naming an entry
// of it, so a mistyped -o never overwrites or removes someone's files.
Status CheckDataSetOutput(const std::string& dir);

// Reads dir/shards.json. NotFound when it is missing; DataLoss naming the field when it is
// not a manifest.
Result<ShardManifest> ReadShardManifest(const std::string& dir);

// All shards of a complete set as one corpus (Corpus::Concat). An unfinished set is
// InvalidArgument (resume the conversion first); a listed shard that is missing or whose
// counts disagree with the manifest is DataLoss naming it.
Result<Corpus> OpenShardedSet(const std::string& dir, BinaryCheck check);

class ShardedSetWriter {
 public:
  // A new set in `dir` (created if missing). A complete set or a single binary set already
  // there is replaced; an unfinished conversion there is InvalidArgument (resume it or
  // remove it), and so is a directory holding anything else. The manifest, with no shards,
  // is written at once with `producer_state`.
  static Result<ShardedSetWriter> Create(const std::string& dir,
                                         std::string producer_state = "{}");
  // Continues the unfinished set in `dir`: shard directories the manifest does not list
  // (written before a kill, never recorded) are removed. NotFound without a manifest;
  // InvalidArgument when the set is already complete; DataLoss naming a listed shard that is
  // missing or whose counts differ from the manifest's (the finished set would not open).
  static Result<ShardedSetWriter> Resume(const std::string& dir);

  const ShardManifest& manifest() const { return manifest_; }

  // Writes `shard` (no concatenation, at least one document) as the next shard, then the
  // manifest with `producer_state`.
  Status AddShard(const Corpus& shard, std::string producer_state);
  // Marks the set complete, with the final state.
  Status Finish(std::string producer_state);
  // Removes what this writer wrote (the manifest first, then its shards) and the directory
  // itself when that leaves it empty: a conversion that failed or produced nothing leaves no
  // set that a rerun would have to resume or remove.
  Status Discard();

  // Test seam (fault injection): called with "shard_renamed" once a shard is in place and
  // before the manifest lists it.
  void set_fault_hook(std::function<void(std::string_view)> hook) { fault_ = std::move(hook); }

 private:
  explicit ShardedSetWriter(std::string dir) : dir_(std::move(dir)) {}
  Status WriteManifest();

  std::string dir_;
  ShardManifest manifest_;
  std::function<void(std::string_view)> fault_;
};

}  // namespace tandem::data
