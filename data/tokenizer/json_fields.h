// Typed reads of tokenizer.json fields. nlohmann's value(key, default) and get<T>() throw
// type_error when a field has another type (`"normalizer": "NFC"`, a number for
// `model.type`); these return InvalidArgument naming the field instead, so a malformed file
// is an error for the caller, never an uncaught exception. A missing or null field gives
// the default.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "runtime/core/status.h"

namespace tandem::tokenizer {

// "field.key", or "key" for a top-level field (empty `field`).
inline std::string FieldName(std::string_view field, const char* key) {
  return field.empty() ? std::string(key) : std::string(field) + "." + key;
}

// Ok when `v` is an object or null (an absent section); otherwise names `field`.
inline Status ExpectObjectOrNull(const nlohmann::json& v, std::string_view field) {
  if (v.is_object() || v.is_null()) return Status::Ok();
  return InvalidArgumentError("tokenizer.json: {} must be an object, got {}", field, v.type_name());
}

// obj[key] as a string; REQUIRES: obj is an object.
inline Result<std::string> StringField(const nlohmann::json& obj, const char* key,
                                       std::string_view field, std::string fallback = {}) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_string()) {
    return InvalidArgumentError("tokenizer.json: {} must be a string, got {}", FieldName(field, key),
                                it->type_name());
  }
  return it->get<std::string>();
}

// obj[key] as a boolean; REQUIRES: obj is an object.
inline Result<bool> BoolField(const nlohmann::json& obj, const char* key, std::string_view field,
                              bool fallback) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return fallback;
  if (!it->is_boolean()) {
    return InvalidArgumentError("tokenizer.json: {} must be true or false, got {}",
                                FieldName(field, key),
                                it->type_name());
  }
  return it->get<bool>();
}

// obj[key] when it is an array, an empty array when missing or null; REQUIRES: obj is an
// object.
inline Result<nlohmann::json> ArrayField(const nlohmann::json& obj, const char* key,
                                         std::string_view field) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nlohmann::json::array();
  if (!it->is_array()) {
    return InvalidArgumentError("tokenizer.json: {} must be an array, got {}", FieldName(field, key),
                                it->type_name());
  }
  return *it;
}

}  // namespace tandem::tokenizer
