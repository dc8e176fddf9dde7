// Values of the chat-template interpreter: Python-like (None, bool, int, float, str, list,
// dict in insertion order, callables) plus Jinja's Undefined. Lists and dicts are shared
// handles; the interpreter never mutates them after creation except a namespace's fields.
// Conversions follow Python/Jinja: str() for output, repr() inside containers, json.dumps
// (ensure_ascii=False, separators ", " and ": ") for tojson.
//
// Thread-safety: values are not synchronised; a rendering owns its values.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "runtime/core/status.h"

namespace tandem::chat_template {

struct Value;
using Array = std::vector<Value>;
struct Object;
struct CallArgs;
struct Stmt;
using Function = std::function<Result<Value>(CallArgs&)>;

struct Value {
  enum class Kind { kUndefined, kNone, kBool, kInt, kFloat, kString, kArray, kObject, kFunction };
  Kind kind = Kind::kUndefined;
  bool b = false;
  int64_t i = 0;
  // kInt from JSON above INT64_MAX (a uint64 such as a schema's "maximum":
  // 18446744073709551615): `i` holds its bits. It prints exactly; arithmetic on it is done
  // in floating point.
  bool u64 = false;
  double f = 0;
  std::string s;  // kString; for kUndefined the name that was looked up
  std::shared_ptr<Array> arr;
  std::shared_ptr<Object> obj;
  std::shared_ptr<Function> fn;
  bool tuple = false;           // kArray: a Python tuple, printed "(1, 2)"
  int nest = 0;                 // kArray: the nesting of lists and dicts inside (Nest())
  const Stmt* macro = nullptr;  // kFunction made by {% macro %}: its statement (call blocks)

  static Value Undefined(std::string name = {});
  static Value None();
  static Value Bool(bool v);
  static Value Int(int64_t v);
  static Value Float(double v);
  static Value Str(std::string v);
  static Value List(Array v = {});
  static Value Dict();
  static Value Fn(Function f);
  static Value FromJson(const nlohmann::ordered_json& j);

  bool is_undefined() const { return kind == Kind::kUndefined; }
  bool is_none() const { return kind == Kind::kNone; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_number() const { return kind == Kind::kInt || kind == Kind::kFloat; }
  bool is_array() const { return kind == Kind::kArray; }
  bool is_object() const { return kind == Kind::kObject; }
  double number() const {
    return kind == Kind::kInt ? (u64 ? double(uint64_t(i)) : double(i)) : f;
  }
  // The integer as Python prints it.
  std::string IntText() const { return u64 ? std::to_string(uint64_t(i)) : std::to_string(i); }

  // How deeply lists and dicts nest in this value (a scalar 0, [1] 1, [[1]] 2); tracked
  // as values are built, so printing and comparing never recurse deeper than the renderer
  // allowed (kMaxValueDepth).
  int Nest() const;

  bool Truthy() const;
  // Python's str(): what {{ }} prints.
  std::string Str() const;
  // Python's repr(), used for values inside printed lists and dicts.
  std::string Repr() const;
  // json.dumps(value, ensure_ascii=False, indent=indent (< 0: none), sort_keys=sort_keys).
  Result<std::string> ToJson(int indent = -1, bool sort_keys = false) const;
  // Python ==. Past kMaxValueDepth levels (two namespaces holding themselves) the values
  // count as different rather than recursing without end.
  bool Equals(const Value& o, int depth = 0) const;
  const char* TypeName() const;
};

struct Object {
  std::vector<std::pair<std::string, Value>> items;
  bool is_namespace = false;
  int nest = 1;  // 1 + the deepest Nest() of the values held (Set keeps it)
  std::shared_ptr<Function> call;  // a callable object: a recursive loop's `loop`
  const Value* Find(const std::string& key) const;
  void Set(const std::string& key, Value v);
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
  // Positional `index`, else keyword `name`, else nullptr.
  const Value* Get(size_t index, const char* name) const;
};

// Python-style indexing helpers on code points.
std::vector<std::string> CodePoints(const std::string& s);

}  // namespace tandem::chat_template
