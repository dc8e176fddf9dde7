#include "runtime/actor/config_keys.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "runtime/core/logging.h"

namespace tandem {
namespace {

std::string Num(double v) {
  if (v == std::floor(v) && std::fabs(v) < 9.2e18) return fmt::format("{}", static_cast<int64_t>(v));
  return fmt::format("{}", v);
}

std::string RangeText(const KeySpec& k) {
  if (k.min && k.max) return fmt::format("in [{}, {}]", Num(*k.min), Num(*k.max));
  if (k.min) return fmt::format(">= {}", Num(*k.min));
  if (k.max) return fmt::format("<= {}", Num(*k.max));
  return "";
}

std::string AllowedText(const std::vector<std::string>& allowed) {
  std::vector<std::string> quoted;
  for (const auto& a : allowed) quoted.push_back(fmt::format("\"{}\"", a));
  return fmt::format("{}", fmt::join(quoted, ", "));
}

bool InRange(const KeySpec& k, double v) {
  if (k.min && !(v >= *k.min)) return false;
  if (k.max && !(v <= *k.max)) return false;
  return true;
}

bool Allowed(const KeySpec& k, const std::string& s) {
  return k.allowed.empty() || std::find(k.allowed.begin(), k.allowed.end(), s) != k.allowed.end();
}

// Collects problems: the first kMaxReported messages, then a count.
struct Problems {
  std::vector<std::string> lines;
  int64_t more = 0;
  bool full() const { return lines.size() >= static_cast<size_t>(KeyTable::kMaxReported); }
  void Add(std::string line) {
    if (full()) {
      ++more;
    } else {
      lines.push_back(std::move(line));
    }
  }
};

std::string Where(const ConfigValue& v, const ConfigValue& parent) {
  const std::string& loc = v.location().empty() ? parent.location() : v.location();
  return loc.empty() ? "" : loc + ": ";
}

void CheckValue(const KeySpec& k, const ConfigValue& v, const std::string& path,
                const std::string& where, Problems* out) {
  auto type_error = [&] {
    out->Add(fmt::format("{}{}: expected {}, got {} {}", where, path, k.Expected(),
                         ConfigKindName(v.kind()), v.ToString()));
  };
  auto range_error = [&](const std::string& shown) {
    out->Add(fmt::format("{}{}: {} is out of range; expected {}", where, path, shown,
                         k.Expected()));
  };
  switch (k.type) {
    case KeyType::kBool:
      if (v.kind() != ConfigValue::Kind::kBool) type_error();
      return;
    case KeyType::kBoolOrString:
      if (v.kind() == ConfigValue::Kind::kBool) return;
      if (v.kind() != ConfigValue::Kind::kString) return type_error();
      if (!Allowed(k, *v.AsString())) range_error(v.ToString());
      return;
    case KeyType::kInt:
      if (v.kind() != ConfigValue::Kind::kInt) return type_error();
      if (!InRange(k, static_cast<double>(*v.AsInt()))) range_error(v.ToString());
      return;
    case KeyType::kNumber: {
      if (v.kind() != ConfigValue::Kind::kInt && v.kind() != ConfigValue::Kind::kDouble)
        return type_error();
      const double d = *v.AsDouble();
      if (!std::isfinite(d) || !InRange(k, d)) range_error(v.ToString());
      return;
    }
    case KeyType::kString:
      if (v.kind() != ConfigValue::Kind::kString) return type_error();
      if (!Allowed(k, *v.AsString())) range_error(v.ToString());
      return;
    case KeyType::kIntArray:
    case KeyType::kStringArray: {
      if (!v.is_array()) return type_error();
      const bool ints = k.type == KeyType::kIntArray;
      for (size_t i = 0; i < v.array().size(); ++i) {
        const ConfigValue& e = v.array()[i];
        const std::string at = fmt::format("{}[{}]", path, i);
        if (e.kind() != (ints ? ConfigValue::Kind::kInt : ConfigValue::Kind::kString)) {
          out->Add(fmt::format("{}{}: expected {}, got {} {}", where, at,
                               ints ? "an integer" : "a string", ConfigKindName(e.kind()),
                               e.ToString()));
        } else if (ints ? !InRange(k, static_cast<double>(*e.AsInt())) : !Allowed(k, *e.AsString())) {
          out->Add(fmt::format("{}{}: {} is out of range; expected {}", where, at, e.ToString(),
                               k.Expected()));
        }
      }
      return;
    }
    case KeyType::kTable:
      if (!v.is_table()) type_error();
      return;  // sub-keys: checked by the caller with k.sub
  }
}

}  // namespace

std::string_view KeyTypeName(KeyType type) {
  switch (type) {
    case KeyType::kBool: return "boolean";
    case KeyType::kBoolOrString: return "boolean or string";
    case KeyType::kInt: return "integer";
    case KeyType::kNumber: return "number";
    case KeyType::kString: return "string";
    case KeyType::kIntArray: return "array of integers";
    case KeyType::kStringArray: return "array of strings";
    case KeyType::kTable: return "table";
  }
  return "?";
}

KeySpec& KeySpec::Keys(const KeyTable& table) {
  sub = std::make_shared<const KeyTable>(table);
  return *this;
}

std::string KeySpec::Expected() const {
  const std::string range = RangeText(*this);
  const std::string sep = range.empty() ? "" : " ";
  switch (type) {
    case KeyType::kBool: return "a boolean (true or false)";
    case KeyType::kBoolOrString:
      return allowed.empty() ? "a boolean (true or false) or a string"
                             : "a boolean (true or false) or one of " + AllowedText(allowed);
    case KeyType::kInt: return "an integer" + sep + range;
    case KeyType::kNumber: return "a finite number" + sep + range;
    case KeyType::kString:
      return allowed.empty() ? "a string" : "one of " + AllowedText(allowed);
    case KeyType::kIntArray: return "an array of integers" + sep + range;
    case KeyType::kStringArray:
      return allowed.empty() ? "an array of strings"
                             : "an array of strings, each one of " + AllowedText(allowed);
    case KeyType::kTable: return "a table";
  }
  return "?";
}

const SectionContext::Group* SectionContext::Find(std::string_view name) const {
  for (const Group& g : groups)
    if (g.name == name) return &g;
  return nullptr;
}

KeySpec& KeyTable::Add(std::string& name, KeyType type, std::string& doc) {
  TANDEM_CHECK_MSG(Find(name) == nullptr, "key '{}' declared twice in [{}]", name, title_);
  KeySpec k;
  k.name = std::move(name);
  k.type = type;
  k.doc = std::move(doc);
  keys_.push_back(std::move(k));
  return keys_.back();
}

void KeyTable::Include(const KeyTable& other) {
  for (const KeySpec& k : other.keys_) {
    TANDEM_CHECK_MSG(Find(k.name) == nullptr, "key '{}' declared twice in [{}]", k.name, title_);
    keys_.push_back(k);
  }
}

const KeySpec* KeyTable::Find(std::string_view name) const {
  for (const KeySpec& k : keys_)
    if (k.name == name) return &k;
  return nullptr;
}

std::vector<std::string> KeyTable::Names() const {
  std::vector<std::string> out;
  for (const KeySpec& k : keys_) out.push_back(k.name);
  return out;
}

Status KeyTable::Check(const ConfigValue& section, std::string_view prefix,
                       const KeyTable* extra, bool unknown_ok) const {
  if (!section.is_table()) {
    return InvalidArgumentError("{}{}: expected a table, got {}", Where(section, section), prefix,
                                ConfigKindName(section.kind()));
  }
  Problems problems;
  std::vector<std::string> names;  // for suggestions, built on the first unknown key
  for (const auto& [key, v] : section.table()) {
    const KeySpec* k = Find(key);
    if (k == nullptr && extra != nullptr) k = extra->Find(key);
    const std::string path = prefix.empty() ? key : fmt::format("{}.{}", prefix, key);
    const std::string where = Where(v, section);
    if (k == nullptr) {
      if (unknown_ok) continue;
      if (problems.full()) {  // no suggestion for problems that are only counted
        problems.Add("");
        continue;
      }
      if (names.empty()) {
        names = Names();
        if (extra != nullptr)
          for (auto& n : extra->Names()) names.push_back(std::move(n));
      }
      const std::string hint = DidYouMean(key, names);
      problems.Add(fmt::format("{}{}: unknown key{}", where, path,
                               hint.empty() ? "" : fmt::format("; did you mean {}?", hint)));
      continue;
    }
    CheckValue(*k, v, path, where, &problems);
    if (k->type == KeyType::kTable && k->sub != nullptr && v.is_table()) {
      Status st = k->sub->Check(v, path);
      if (!st.ok()) {
        std::string_view msg = st.message();
        size_t start = 0;
        while (start < msg.size()) {
          size_t end = msg.find('\n', start);
          if (end == std::string_view::npos) end = msg.size();
          problems.Add(std::string(msg.substr(start, end - start)));
          start = end + 1;
        }
      }
    }
  }
  for (const KeyTable* t : {this, extra}) {
    if (t == nullptr) continue;
    for (const KeySpec& k : t->keys_) {
      if (k.required && !section.Has(k.name)) {
        problems.Add(fmt::format("{}{}: missing required key '{}' ({})", Where(section, section),
                                 prefix, k.name, k.doc));
      }
    }
  }
  if (problems.lines.empty()) return Status::Ok();
  std::string msg = fmt::format("{}", fmt::join(problems.lines, "\n"));
  if (problems.more > 0) msg += fmt::format("\n... and {} more problems in {}", problems.more, prefix);
  return InvalidArgumentError("{}", msg);
}

Status KeyTable::CheckSection(const ConfigValue& section, const SectionContext& ctx) const {
  return check_ ? check_(section, ctx) : Status::Ok();
}

ConfigValue KeyTable::WithDefaults(const ConfigValue& section) const {
  ConfigValue out = section;
  for (const KeySpec& k : keys_) {
    if (!k.default_value.is_null() && !out.Has(k.name)) out.Set(k.name, k.default_value);
  }
  return out;
}

const ConfigValue* KeyTable::ValueOrDefault(const ConfigValue& section, std::string_view key,
                                            KeyType type) const {
  const KeySpec* k = Find(key);
  TANDEM_CHECK_MSG(k != nullptr, "key '{}' is not declared in [{}]", key, title_);
  TANDEM_CHECK_MSG(k->type == type, "key '{}' of [{}] is a {}, read as a {}", key, title_,
                   KeyTypeName(k->type), KeyTypeName(type));
  if (const ConfigValue* v = section.Find(key)) return v;
  return k->default_value.is_null() ? nullptr : &k->default_value;
}

bool KeyTable::GetBool(const ConfigValue& section, std::string_view key) const {
  const ConfigValue* v = ValueOrDefault(section, key, KeyType::kBool);
  TANDEM_CHECK_MSG(v != nullptr, "key '{}' has no value and no default", key);
  Result<bool> r = v->AsBool();
  TANDEM_CHECK_MSG(r.ok(), "key '{}' read before Check(): {}", key, r.status().ToString());
  return *r;
}

int64_t KeyTable::GetInt(const ConfigValue& section, std::string_view key) const {
  std::optional<int64_t> v = GetOptInt(section, key);
  TANDEM_CHECK_MSG(v.has_value(), "key '{}' has no value and no default", key);
  return *v;
}

double KeyTable::GetNumber(const ConfigValue& section, std::string_view key) const {
  std::optional<double> v = GetOptNumber(section, key);
  TANDEM_CHECK_MSG(v.has_value(), "key '{}' has no value and no default", key);
  return *v;
}

std::string KeyTable::GetString(const ConfigValue& section, std::string_view key) const {
  const ConfigValue* v = ValueOrDefault(section, key, KeyType::kString);
  TANDEM_CHECK_MSG(v != nullptr, "key '{}' has no value and no default", key);
  Result<std::string> r = v->AsString();
  TANDEM_CHECK_MSG(r.ok(), "key '{}' read before Check(): {}", key, r.status().ToString());
  return *r;
}

std::optional<int64_t> KeyTable::GetOptInt(const ConfigValue& section, std::string_view key) const {
  const ConfigValue* v = ValueOrDefault(section, key, KeyType::kInt);
  if (v == nullptr) return std::nullopt;
  Result<int64_t> r = v->AsInt();
  TANDEM_CHECK_MSG(r.ok(), "key '{}' read before Check(): {}", key, r.status().ToString());
  return *r;
}

std::optional<double> KeyTable::GetOptNumber(const ConfigValue& section,
                                             std::string_view key) const {
  const ConfigValue* v = ValueOrDefault(section, key, KeyType::kNumber);
  if (v == nullptr) return std::nullopt;
  Result<double> r = v->AsDouble();
  TANDEM_CHECK_MSG(r.ok(), "key '{}' read before Check(): {}", key, r.status().ToString());
  return *r;
}

std::string KeyTable::Markdown() const {
  std::string out = "| key | type | range | default | meaning |\n| --- | --- | --- | --- | --- |\n";
  auto row = [&out](const KeySpec& k, const std::string& name) {
    std::string range = RangeText(k);
    if (!k.allowed.empty()) {
      std::vector<std::string> q;
      for (const auto& a : k.allowed) q.push_back(fmt::format("`{}`", a));
      range = fmt::format("{}", fmt::join(q, ", "));
    }
    std::string def = k.required                    ? "required"
                      : !k.default_value.is_null() ? fmt::format("`{}`", k.default_value.ToString())
                      : !k.default_doc.empty()     ? k.default_doc
                                                   : "none";
    out += fmt::format("| `{}` | {} | {} | {} | {} |\n", name, KeyTypeName(k.type), range, def,
                       k.doc);
  };
  for (const KeySpec& k : keys_) {
    row(k, k.name);
    if (k.sub != nullptr)
      for (const KeySpec& s : k.sub->keys()) row(s, k.name + "." + s.name);
  }
  return out;
}

std::string KeyPath(const ConfigValue& section, std::string_view prefix, std::string_view key) {
  const ConfigValue* v = section.Find(key);
  return fmt::format("{}{}.{}", v != nullptr ? Where(*v, section) : Where(section, section),
                     prefix, key);
}

size_t EditDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] != b[j - 1])});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string DidYouMean(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    size_t d = EditDistance(word, c);
    // Not a suggestion if it rewrites the whole of either word ("k8" is not a typo of "in").
    if (d < best_d && d < word.size() && d < c.size()) {
      best_d = d;
      best = c;
    }
  }
  return best;
}

}  // namespace tandem
