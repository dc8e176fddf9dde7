// KeyTable: the keys a config section accepts, declared once: name, type, range or allowed
// values, default and a one-line doc. Every section of a job file is checked against one —
// [job], [store], [channels.*], the keys every actor group has, and each actor class's own
// (a class hands its table to TANDEM_REGISTER_ACTOR, registry.h). The same table then feeds
// the class's settings parser (typed getters that return the declared default, so a default
// exists in one place) and the generated key reference (docs/job-file.md, `tandem keys`).
//
//   KeyTable t("demo.producer");
//   t.Int("objects", "objects per replica").Default(1000).Min(0);
//   t.String("mode", "how to fill objects").Default("random").OneOf({"random", "zeros"});
//   RETURN_IF_ERROR(t.Check(section, "actors.producer"));   // before reading
//   int64_t n = t.GetInt(section, "objects");                 // 1000 when absent
//
// Check reports every problem of a section (up to kMaxReported), one per line, each as
// "job.toml:14: actors.drafter.blok_size: unknown key; did you mean block_size?".
// A table can also carry a whole-section check (SetCheck) for rules that span keys or other
// groups of the job (e.g. mask_token_id below the target's vocab); it receives the
// SectionContext.
//
// Thread-safety: a value type; a built table is immutable and safe to read from any thread.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/actor/config.h"
#include "runtime/core/status.h"

namespace tandem {

class KeyTable;

// kBoolOrString: true, false, or one of the key's OneOf strings (e.g. resume = "force").
enum class KeyType {
  kBool, kBoolOrString, kInt, kNumber, kString, kIntArray, kStringArray, kTable
};
std::string_view KeyTypeName(KeyType type);  // "integer", "array of strings", ...

// One declared key. Built with KeyTable's adders and the chained setters below.
struct KeySpec {
  std::string name;
  KeyType type = KeyType::kString;
  std::string doc;                        // one line
  std::optional<double> min, max;         // kInt, kNumber, elements of kIntArray
  std::vector<std::string> allowed;       // kString, elements of kStringArray (empty: any)
  ConfigValue default_value;              // null: no fixed default (see default_doc)
  std::string default_doc;                // a computed default, e.g. "max_steps"
  bool required = false;
  // kString: a directory that one running job at a time may use (a checkpoint dir). The
  // daemon queues a job whose directory a running job holds, and a running job holds a
  // lock in it (runtime/core/dir_lock.h), so two processes never share one.
  bool exclusive_dir = false;
  std::shared_ptr<const KeyTable> sub;    // kTable: the keys it takes (null: free-form)

  KeySpec& Default(ConfigValue v) { default_value = std::move(v); return *this; }
  KeySpec& DefaultIs(std::string what) { default_doc = std::move(what); return *this; }
  KeySpec& Min(double v) { min = v; return *this; }
  KeySpec& Max(double v) { max = v; return *this; }
  KeySpec& Range(double lo, double hi) { min = lo; max = hi; return *this; }
  KeySpec& OneOf(std::vector<std::string> values) { allowed = std::move(values); return *this; }
  KeySpec& Required() { required = true; return *this; }
  KeySpec& ExclusiveDir() { exclusive_dir = true; return *this; }
  KeySpec& Keys(const KeyTable& table);   // kTable: declares its sub-keys

  // "an integer in [1, 64]", "one of \"split\", \"truncate\"", "a number >= 0".
  std::string Expected() const;
};

// What a whole-section check may look at besides the section: the job's other groups.
struct SectionContext {
  struct Group {
    std::string name;         // [actors.NAME]
    std::string class_name;
    int64_t replicas = 1;
    const ConfigValue* settings = nullptr;  // the group's section; outlives the context
  };
  std::string group;          // the section being checked ("drafter")
  int64_t job_seed = 0;
  std::vector<Group> groups;  // every group of the job, in file order
  const Group* Find(std::string_view name) const;
};

// A GPU that a replica of the section's group was placed on (KeyTable::SetDeviceCheck).
struct PlacedGpu {
  int index = 0;                // CUDA device ordinal
  std::string name;             // "NVIDIA H200"
  int compute_capability = 0;   // major * 10 + minor
};

class KeyTable {
 public:
  using SectionCheck = std::function<Status(const ConfigValue& section, const SectionContext&)>;
  // Settings that need a kind of GPU (e.g. FP8 tensor cores) are checked against each GPU a
  // replica was placed on, when the job is validated, before any actor starts. `prefix`
  // names the section ("actors.target").
  using DeviceCheck = std::function<Status(const ConfigValue& section, std::string_view prefix,
                                           const PlacedGpu& gpu)>;
  static constexpr int kMaxReported = 10;

  KeyTable() = default;
  explicit KeyTable(std::string title, std::string doc = "")
      : title_(std::move(title)), doc_(std::move(doc)) {}

  // Declares a key; the returned spec is for chaining (valid until the next Add).
  KeySpec& Bool(std::string name, std::string doc) { return Add(name, KeyType::kBool, doc); }
  KeySpec& BoolOrString(std::string name, std::string doc) {
    return Add(name, KeyType::kBoolOrString, doc);
  }
  KeySpec& Int(std::string name, std::string doc) { return Add(name, KeyType::kInt, doc); }
  KeySpec& Number(std::string name, std::string doc) { return Add(name, KeyType::kNumber, doc); }
  KeySpec& String(std::string name, std::string doc) { return Add(name, KeyType::kString, doc); }
  KeySpec& IntArray(std::string name, std::string doc) {
    return Add(name, KeyType::kIntArray, doc);
  }
  KeySpec& StringArray(std::string name, std::string doc) {
    return Add(name, KeyType::kStringArray, doc);
  }
  KeySpec& Table(std::string name, std::string doc) { return Add(name, KeyType::kTable, doc); }
  // Every key of `other` (a shared set, e.g. the data-source keys); CHECKs against duplicates.
  void Include(const KeyTable& other);
  void SetCheck(SectionCheck check) { check_ = std::move(check); }
  void SetDeviceCheck(DeviceCheck check) { device_check_ = std::move(check); }
  // The pinned host memory per replica of a group whose section sets no `pinned_bytes`
  // (e.g. a drafter's checkpoint snapshot, sized from its model); placement counts it.
  using PinnedDefault =
      std::function<Result<uint64_t>(const ConfigValue& section, const SectionContext&)>;
  void SetPinnedDefault(PinnedDefault f) { pinned_default_ = std::move(f); }
  Result<uint64_t> DefaultPinnedBytes(const ConfigValue& section,
                                      const SectionContext& ctx) const {
    return pinned_default_ ? pinned_default_(section, ctx) : Result<uint64_t>(uint64_t{0});
  }
  // A lower bound of the device memory one replica takes on the GPU it runs on (e.g. a
  // target's weights, a drafter's parameters with their optimizer state), with what it
  // counts ("weights 50.1 GiB"). The job check adds the bounds of the replicas that share a
  // GPU and refuses one that cannot hold them, before any actor loads anything.
  // `alone_bytes` more are needed unless a replica of group `unless_group` shares the GPU
  // (e.g. a drafter that loads its own copy of the target's embedding and LM head when no
  // target replica is colocated); `alone_what` says what they are.
  struct DeviceBytes {
    uint64_t bytes = 0;
    std::string what;
    uint64_t alone_bytes = 0;
    std::string alone_what;
    std::string unless_group;
  };
  using DeviceBytesEstimate =
      std::function<Result<DeviceBytes>(const ConfigValue& section, const SectionContext&)>;
  void SetDeviceBytesEstimate(DeviceBytesEstimate f) { device_bytes_ = std::move(f); }
  Result<DeviceBytes> EstimateDeviceBytes(const ConfigValue& section,
                                          const SectionContext& ctx) const {
    return device_bytes_ ? device_bytes_(section, ctx) : Result<DeviceBytes>(DeviceBytes{});
  }

  const std::string& title() const { return title_; }
  const std::string& doc() const { return doc_; }
  const std::vector<KeySpec>& keys() const { return keys_; }
  const KeySpec* Find(std::string_view name) const;
  std::vector<std::string> Names() const;

  // Checks `section` (a table named `prefix` in messages, e.g. "actors.drafter"): every key
  // declared here or in `extra` (may be null), of its type, in its range; required keys
  // present. With `unknown_ok`, undeclared keys pass (a class that declares none).
  // InvalidArgument listing every problem found (up to kMaxReported), one per line.
  Status Check(const ConfigValue& section, std::string_view prefix,
               const KeyTable* extra = nullptr, bool unknown_ok = false) const;
  // Runs the whole-section check, if any (after Check passed).
  Status CheckSection(const ConfigValue& section, const SectionContext& ctx) const;
  // Runs the device check, if any, for one placed GPU (after Check passed).
  Status CheckDevice(const ConfigValue& section, std::string_view prefix,
                     const PlacedGpu& gpu) const {
    return device_check_ ? device_check_(section, prefix, gpu) : Status::Ok();
  }

  // `section` with every absent key that has a fixed default set to it.
  ConfigValue WithDefaults(const ConfigValue& section) const;

  // Typed getters: the value, else the declared default. REQUIRES: `key` is declared here
  // with that type and Check(section) passed (both CHECKed). GetInt etc. also REQUIRE a
  // fixed default or a present value; the Opt forms return nullopt when both are missing.
  bool GetBool(const ConfigValue& section, std::string_view key) const;
  int64_t GetInt(const ConfigValue& section, std::string_view key) const;
  double GetNumber(const ConfigValue& section, std::string_view key) const;
  std::string GetString(const ConfigValue& section, std::string_view key) const;
  std::optional<int64_t> GetOptInt(const ConfigValue& section, std::string_view key) const;
  std::optional<double> GetOptNumber(const ConfigValue& section, std::string_view key) const;

  // A Markdown table: | key | type | range | default | meaning |, then sub-tables.
  std::string Markdown() const;

 private:
  KeySpec& Add(std::string& name, KeyType type, std::string& doc);
  const ConfigValue* ValueOrDefault(const ConfigValue& section, std::string_view key,
                                    KeyType type) const;

  std::string title_;
  std::string doc_;
  std::vector<KeySpec> keys_;
  SectionCheck check_;
  DeviceCheck device_check_;
  PinnedDefault pinned_default_;
  DeviceBytesEstimate device_bytes_;
};

// "job.toml:14: actors.drafter.lr" for messages about `key` of `section` (named `prefix`),
// with the value's own line when it is present, else the section's.
std::string KeyPath(const ConfigValue& section, std::string_view prefix, std::string_view key);

// Levenshtein distance between a and b.
size_t EditDistance(std::string_view a, std::string_view b);
// The closest of `candidates` to `word` by edit distance, or "" if none is close.
std::string DidYouMean(const std::string& word, const std::vector<std::string>& candidates);

}  // namespace tandem
