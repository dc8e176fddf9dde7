#include "data/chat_template/value.h"

#include <algorithm>
#include <cmath>

#include <nlohmann/json.hpp>

#include "data/chat_template/limits.h"

namespace tandem::chat_template {
namespace {

std::string FloatRepr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::string s = fmt::format("{}", v);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

std::string StrRepr(const std::string& s) {
  const bool dq = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = dq ? '"' : '\'';
  std::string out(1, q);
  for (char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c == q) {
          out += '\\';
          out += c;
        } else if (static_cast<uint8_t>(c) < 0x20 || c == 0x7F) {
          out += fmt::format("\\x{:02x}", static_cast<uint8_t>(c));
        } else {
          out += c;
        }
    }
  }
  return out + q;
}

void JsonString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (char c : s) {
    switch (c) {
      case '"': *out += "\\\""; break;
      case '\\': *out += "\\\\"; break;
      case '\n': *out += "\\n"; break;
      case '\r': *out += "\\r"; break;
      case '\t': *out += "\\t"; break;
      case '\b': *out += "\\b"; break;
      case '\f': *out += "\\f"; break;
      default:
        if (static_cast<uint8_t>(c) < 0x20) {
          *out += fmt::format("\\u{:04x}", static_cast<uint8_t>(c));
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

Status Dump(const Value& v, int indent, bool sort_keys, int depth, std::string* out) {
  if (depth > kMaxValueDepth) {
    return InvalidArgumentError(
        "tojson: a value nested deeper than {} levels (a namespace that holds itself?)",
        kMaxValueDepth);
  }
  if (out->size() > kMaxOutputBytes) {
    return InvalidArgumentError("tojson: the JSON is longer than the {}-byte limit",
                                kMaxOutputBytes);
  }
  const auto newline = [&](int d) {
    if (indent < 0) return;
    out->push_back('\n');
    out->append(size_t(indent * d), ' ');
  };
  const char* item_sep = indent < 0 ? ", " : ",";
  switch (v.kind) {
    case Value::Kind::kNone: *out += "null"; return Status::Ok();
    case Value::Kind::kBool: *out += v.b ? "true" : "false"; return Status::Ok();
    case Value::Kind::kInt: *out += v.IntText(); return Status::Ok();
    case Value::Kind::kFloat:
      if (std::isnan(v.f)) *out += "NaN";
      else if (std::isinf(v.f)) *out += v.f > 0 ? "Infinity" : "-Infinity";
      else *out += FloatRepr(v.f);
      return Status::Ok();
    case Value::Kind::kString: JsonString(v.s, out); return Status::Ok();
    case Value::Kind::kArray: {
      if (v.arr->empty()) {
        *out += "[]";
        return Status::Ok();
      }
      out->push_back('[');
      for (size_t k = 0; k < v.arr->size(); ++k) {
        if (k) *out += item_sep;
        newline(depth + 1);
        RETURN_IF_ERROR(Dump((*v.arr)[k], indent, sort_keys, depth + 1, out));
      }
      newline(depth);
      out->push_back(']');
      return Status::Ok();
    }
    case Value::Kind::kObject: {
      if (v.obj->items.empty()) {
        *out += "{}";
        return Status::Ok();
      }
      auto items = v.obj->items;
      if (sort_keys) {
        std::stable_sort(items.begin(), items.end(),
                         [](const auto& a, const auto& b) { return a.first < b.first; });
      }
      out->push_back('{');
      for (size_t k = 0; k < items.size(); ++k) {
        if (k) *out += item_sep;
        newline(depth + 1);
        JsonString(items[k].first, out);
        *out += ": ";
        RETURN_IF_ERROR(Dump(items[k].second, indent, sort_keys, depth + 1, out));
      }
      newline(depth);
      out->push_back('}');
      return Status::Ok();
    }
    default:
      return InvalidArgumentError("tojson: a value of type {} is not JSON serializable",
                                  v.TypeName());
  }
}

}  // namespace

Value Value::Undefined(std::string name) {
  Value v;
  v.s = std::move(name);
  return v;
}
Value Value::None() {
  Value v;
  v.kind = Kind::kNone;
  return v;
}
Value Value::Bool(bool x) {
  Value v;
  v.kind = Kind::kBool;
  v.b = x;
  return v;
}
Value Value::Int(int64_t x) {
  Value v;
  v.kind = Kind::kInt;
  v.i = x;
  return v;
}
Value Value::Float(double x) {
  Value v;
  v.kind = Kind::kFloat;
  v.f = x;
  return v;
}
Value Value::Str(std::string x) {
  Value v;
  v.kind = Kind::kString;
  v.s = std::move(x);
  return v;
}
Value Value::List(Array x) {
  Value v;
  v.kind = Kind::kArray;
  v.nest = 1;
  for (const Value& e : x) v.nest = std::max(v.nest, e.Nest() + 1);
  v.arr = std::make_shared<Array>(std::move(x));
  return v;
}

int Value::Nest() const {
  if (kind == Kind::kArray) return nest;
  if (kind == Kind::kObject) return obj->nest;
  return 0;
}
Value Value::Dict() {
  Value v;
  v.kind = Kind::kObject;
  v.obj = std::make_shared<Object>();
  return v;
}
Value Value::Fn(Function f) {
  Value v;
  v.kind = Kind::kFunction;
  v.fn = std::make_shared<Function>(std::move(f));
  return v;
}

Value Value::FromJson(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::ordered_json::value_t::null: return None();
    case nlohmann::ordered_json::value_t::boolean: return Bool(j.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer: return Int(j.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      // Casting alone wrapped 9223372036854775808 to -9223372036854775808.
      Value v = Int(static_cast<int64_t>(j.get<uint64_t>()));
      v.u64 = j.get<uint64_t>() > uint64_t(INT64_MAX);
      return v;
    }
    case nlohmann::ordered_json::value_t::number_float: return Float(j.get<double>());
    case nlohmann::ordered_json::value_t::string: return Str(j.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      Array a;
      a.reserve(j.size());
      for (const auto& e : j) a.push_back(FromJson(e));
      return List(std::move(a));
    }
    case nlohmann::ordered_json::value_t::object: {
      Value d = Dict();
      for (auto it = j.begin(); it != j.end(); ++it) {
        Value e = FromJson(it.value());
        d.obj->nest = std::max(d.obj->nest, e.Nest() + 1);
        d.obj->items.emplace_back(it.key(), std::move(e));
      }
      return d;
    }
    default: return Undefined();
  }
}

bool Value::Truthy() const {
  switch (kind) {
    case Kind::kUndefined:
    case Kind::kNone: return false;
    case Kind::kBool: return b;
    case Kind::kInt: return i != 0;
    case Kind::kFloat: return f != 0;
    case Kind::kString: return !s.empty();
    case Kind::kArray: return !arr->empty();
    case Kind::kObject: return obj->is_namespace || !obj->items.empty();
    case Kind::kFunction: return true;
  }
  return false;
}

std::string Value::Str() const {
  switch (kind) {
    case Kind::kUndefined: return "";
    case Kind::kString: return s;
    default: return Repr();
  }
}

std::string Value::Repr() const {
  switch (kind) {
    case Kind::kUndefined: return "";
    case Kind::kNone: return "None";
    case Kind::kBool: return b ? "True" : "False";
    case Kind::kInt: return IntText();
    case Kind::kFloat: return FloatRepr(f);
    case Kind::kString: return StrRepr(s);
    case Kind::kArray: {
      std::string out = tuple ? "(" : "[";
      for (size_t k = 0; k < arr->size(); ++k) out += (k ? ", " : "") + (*arr)[k].Repr();
      if (tuple) return out + (arr->size() == 1 ? ",)" : ")");
      return out + "]";
    }
    case Kind::kObject: {
      if (obj->is_namespace) return "<Namespace>";
      std::string out = "{";
      for (size_t k = 0; k < obj->items.size(); ++k) {
        out += (k ? ", " : "") + StrRepr(obj->items[k].first) + ": " + obj->items[k].second.Repr();
      }
      return out + "}";
    }
    case Kind::kFunction: return "<function>";
  }
  return "";
}

Result<std::string> Value::ToJson(int indent, bool sort_keys) const {
  std::string out;
  RETURN_IF_ERROR(Dump(*this, indent, sort_keys, 0, &out));
  return out;
}

bool Value::Equals(const Value& o, int depth) const {
  if (depth > kMaxValueDepth) return false;
  if (is_number() && o.is_number()) return number() == o.number();
  if (kind == Kind::kBool && o.is_number()) return double(b) == o.number();
  if (is_number() && o.kind == Kind::kBool) return number() == double(o.b);
  if (kind != o.kind) return false;
  switch (kind) {
    case Kind::kUndefined:
    case Kind::kNone: return true;
    case Kind::kBool: return b == o.b;
    case Kind::kString: return s == o.s;
    case Kind::kArray: {
      if (arr->size() != o.arr->size()) return false;
      for (size_t k = 0; k < arr->size(); ++k) {
        if (!(*arr)[k].Equals((*o.arr)[k], depth + 1)) return false;
      }
      return true;
    }
    case Kind::kObject: {
      if (obj == o.obj) return true;
      if (obj->items.size() != o.obj->items.size()) return false;
      for (const auto& [k, v] : obj->items) {
        const Value* w = o.obj->Find(k);
        if (!w || !v.Equals(*w, depth + 1)) return false;
      }
      return true;
    }
    default: return fn == o.fn;
  }
}

const char* Value::TypeName() const {
  switch (kind) {
    case Kind::kUndefined: return "undefined";
    case Kind::kNone: return "none";
    case Kind::kBool: return "bool";
    case Kind::kInt: return "int";
    case Kind::kFloat: return "float";
    case Kind::kString: return "string";
    case Kind::kArray: return "list";
    case Kind::kObject: return "dict";
    case Kind::kFunction: return "function";
  }
  return "?";
}

const Value* Object::Find(const std::string& key) const {
  for (const auto& [k, v] : items) {
    if (k == key) return &v;
  }
  return nullptr;
}

void Object::Set(const std::string& key, Value v) {
  nest = std::max(nest, v.Nest() + 1);
  for (auto& [k, old] : items) {
    if (k == key) {
      old = std::move(v);
      return;
    }
  }
  items.emplace_back(key, std::move(v));
}

const Value* CallArgs::Get(size_t index, const char* name) const {
  if (index < positional.size()) return &positional[index];
  for (const auto& [k, v] : keyword) {
    if (k == name) return &v;
  }
  return nullptr;
}

std::vector<std::string> CodePoints(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t n = 1;
    const auto c = static_cast<uint8_t>(s[i]);
    if (c >= 0xF0) n = 4;
    else if (c >= 0xE0) n = 3;
    else if (c >= 0xC0) n = 2;
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

}  // namespace tandem::chat_template
