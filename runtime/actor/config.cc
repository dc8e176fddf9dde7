#include "runtime/actor/config.h"

namespace tandem {

std::string_view ConfigKindName(ConfigValue::Kind kind) {
  switch (kind) {
    case ConfigValue::Kind::kNull: return "nothing";
    case ConfigValue::Kind::kBool: return "a boolean";
    case ConfigValue::Kind::kInt: return "an integer";
    case ConfigValue::Kind::kDouble: return "a number";
    case ConfigValue::Kind::kString: return "a string";
    case ConfigValue::Kind::kArray: return "an array";
    case ConfigValue::Kind::kTable: return "a table";
  }
  return "unknown";
}

Status ConfigValue::TypeError(std::string_view key, std::string_view expected,
                              const std::string& parent_location) const {
  const std::string& loc = location_.empty() ? parent_location : location_;
  std::string where = loc.empty() ? "" : loc + ": ";
  std::string what = key.empty() ? "value" : fmt::format("key '{}'", key);
  return InvalidArgumentError("{}{}: expected {}, got {}", where, what, expected,
                              ConfigKindName(kind()));
}

std::optional<double> ConfigValue::PeekDouble() const {
  if (auto* d = std::get_if<double>(&v_)) return *d;
  if (auto* i = std::get_if<int64_t>(&v_)) return static_cast<double>(*i);
  return std::nullopt;
}

Result<bool> ConfigValue::AsBool() const {
  if (auto* b = std::get_if<bool>(&v_)) return *b;
  return TypeError("", "a boolean", "");
}

Result<int64_t> ConfigValue::AsInt() const {
  if (auto* i = std::get_if<int64_t>(&v_)) return *i;
  return TypeError("", "an integer", "");
}

Result<double> ConfigValue::AsDouble() const {
  if (auto d = PeekDouble()) return *d;
  return TypeError("", "a number", "");
}

Result<std::string> ConfigValue::AsString() const {
  if (auto* s = std::get_if<std::string>(&v_)) return *s;
  return TypeError("", "a string", "");
}

const ConfigValue::Array& ConfigValue::array() const {
  TANDEM_CHECK_MSG(is_array(), "ConfigValue is {}, not an array", ConfigKindName(kind()));
  return std::get<Array>(v_);
}

ConfigValue::Array& ConfigValue::array() {
  TANDEM_CHECK_MSG(is_array(), "ConfigValue is {}, not an array", ConfigKindName(kind()));
  return std::get<Array>(v_);
}

const ConfigValue::Table& ConfigValue::table() const {
  TANDEM_CHECK_MSG(is_table(), "ConfigValue is {}, not a table", ConfigKindName(kind()));
  return std::get<Table>(v_);
}

const ConfigValue* ConfigValue::Find(std::string_view key) const {
  const Table* t = std::get_if<Table>(&v_);
  if (t == nullptr) return nullptr;
  for (const auto& [k, v] : *t) {
    if (k == key) return &v;
  }
  return nullptr;
}

ConfigValue& ConfigValue::Set(std::string key, ConfigValue value) {
  TANDEM_CHECK_MSG(is_table(), "Set('{}') on {}, not a table", key, ConfigKindName(kind()));
  Table& t = std::get<Table>(v_);
  for (auto& [k, v] : t) {
    if (k == key) {
      v = std::move(value);
      return v;
    }
  }
  t.emplace_back(std::move(key), std::move(value));
  return t.back().second;
}

Result<bool> ConfigValue::GetBool(std::string_view key, bool fallback) const {
  const ConfigValue* v = Find(key);
  if (v == nullptr) return fallback;
  if (auto* b = std::get_if<bool>(&v->v_)) return *b;
  return v->TypeError(key, "a boolean", location_);
}

Result<int64_t> ConfigValue::GetInt(std::string_view key, int64_t fallback) const {
  const ConfigValue* v = Find(key);
  if (v == nullptr) return fallback;
  if (auto* i = std::get_if<int64_t>(&v->v_)) return *i;
  return v->TypeError(key, "an integer", location_);
}

Result<double> ConfigValue::GetDouble(std::string_view key, double fallback) const {
  const ConfigValue* v = Find(key);
  if (v == nullptr) return fallback;
  if (auto d = v->PeekDouble()) return *d;
  return v->TypeError(key, "a number", location_);
}

Result<std::string> ConfigValue::GetString(std::string_view key, std::string fallback) const {
  const ConfigValue* v = Find(key);
  if (v == nullptr) return fallback;
  if (auto* s = std::get_if<std::string>(&v->v_)) return *s;
  return v->TypeError(key, "a string", location_);
}

Result<std::string> ConfigValue::RequireString(std::string_view key) const {
  if (Find(key) == nullptr) {
    return InvalidArgumentError("{}missing required key '{}'",
                                location_.empty() ? "" : location_ + ": ", key);
  }
  return GetString(key, "");
}

std::string ConfigValue::ToString() const {
  switch (kind()) {
    case Kind::kNull: return "null";
    case Kind::kBool: return std::get<bool>(v_) ? "true" : "false";
    case Kind::kInt: return fmt::format("{}", std::get<int64_t>(v_));
    case Kind::kDouble: return fmt::format("{}", std::get<double>(v_));
    case Kind::kString: return fmt::format("\"{}\"", std::get<std::string>(v_));
    case Kind::kArray: {
      std::string out = "[";
      for (const auto& e : std::get<Array>(v_)) {
        if (out.size() > 1) out += ", ";
        out += e.ToString();
      }
      return out + "]";
    }
    case Kind::kTable: {
      std::string out = "{";
      for (const auto& [k, e] : std::get<Table>(v_)) {
        if (out.size() > 1) out += ", ";
        out += k + " = " + e.ToString();
      }
      return out + "}";
    }
  }
  return "?";
}

}  // namespace tandem
