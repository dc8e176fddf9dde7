// ConfigValue: a small tree of config values (null, bool, int, double, string, array, table).
//
// The job loader fills one per actor section of a job file; actor factories read their
// settings from it. Typed getters return a Status that names the key, the expected type and,
// when the loader recorded it, where the value came from ("job.toml:12"), so a user can fix it.
//
//   ConfigValue section = ConfigValue::Table();
//   section.Set("replicas", 3);
//   ASSIGN_OR_RETURN(int64_t n, section.GetInt("replicas", 1));
//
// Tables keep their keys in insertion order (the order of the job file).
// Thread-safety: a value type; concurrent reads are safe, writes need external locking.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "runtime/core/status.h"

namespace tandem {

class ConfigValue {
 public:
  enum class Kind { kNull, kBool, kInt, kDouble, kString, kArray, kTable };
  using Array = std::vector<ConfigValue>;
  using Table = std::vector<std::pair<std::string, ConfigValue>>;

  ConfigValue() = default;
  ConfigValue(bool v) : v_(v) {}                             // NOLINT: implicit by design
  ConfigValue(int v) : v_(static_cast<int64_t>(v)) {}        // NOLINT
  ConfigValue(int64_t v) : v_(v) {}                          // NOLINT
  ConfigValue(double v) : v_(v) {}                           // NOLINT
  ConfigValue(const char* v) : v_(std::string(v)) {}         // NOLINT
  ConfigValue(std::string v) : v_(std::move(v)) {}           // NOLINT
  ConfigValue(Array v) : v_(std::move(v)) {}                 // NOLINT
  static ConfigValue MakeTable() { return ConfigValue(TableTag{}); }
  // A table of `entries`, kept in their order, in time linear in their number (Set looks each
  // key up first). REQUIRES: the keys are distinct (a TOML parser guarantees it).
  static ConfigValue MakeTable(Table entries) {
    ConfigValue v(TableTag{});
    std::get<Table>(v.v_) = std::move(entries);
    return v;
  }

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is_null() const { return kind() == Kind::kNull; }
  bool is_table() const { return kind() == Kind::kTable; }
  bool is_array() const { return kind() == Kind::kArray; }

  // Where the value was read from, e.g. "job.toml:12" (empty when unknown).
  const std::string& location() const { return location_; }
  void set_location(std::string where) { location_ = std::move(where); }

  // Scalar accessors: the value, or InvalidArgument naming the expected type.
  // AsDouble also accepts an integer.
  Result<bool> AsBool() const;
  Result<int64_t> AsInt() const;
  Result<double> AsDouble() const;
  Result<std::string> AsString() const;
  // REQUIRES: is_array() / is_table() (CHECKed).
  const Array& array() const;
  Array& array();
  const Table& table() const;

  // Table access. Find returns nullptr when absent (or when this is not a table).
  const ConfigValue* Find(std::string_view key) const;
  bool Has(std::string_view key) const { return Find(key) != nullptr; }
  // Inserts or replaces `key` (a linear search: build large tables with MakeTable(entries)).
  // REQUIRES: is_table().
  ConfigValue& Set(std::string key, ConfigValue value);

  // Typed table getters: the value under `key`, `fallback` if absent, or InvalidArgument
  // ("<location>: key 'replicas': expected an integer, got a string") on a type mismatch.
  Result<bool> GetBool(std::string_view key, bool fallback) const;
  Result<int64_t> GetInt(std::string_view key, int64_t fallback) const;
  Result<double> GetDouble(std::string_view key, double fallback) const;
  Result<std::string> GetString(std::string_view key, std::string fallback) const;
  // As above, but a missing key is InvalidArgument ("missing required key 'class'").
  Result<std::string> RequireString(std::string_view key) const;

  // Compact TOML-like rendering for logs and error messages: {a = 1, b = "x", c = [1, 2]}.
  std::string ToString() const;

 private:
  struct TableTag {};
  explicit ConfigValue(TableTag) : v_(Table{}) {}
  Status TypeError(std::string_view key, std::string_view expected,
                   const std::string& parent_location) const;
  std::optional<double> PeekDouble() const;

  std::variant<std::monostate, bool, int64_t, double, std::string, Array, Table> v_;
  std::string location_;
};

std::string_view ConfigKindName(ConfigValue::Kind kind);

}  // namespace tandem
