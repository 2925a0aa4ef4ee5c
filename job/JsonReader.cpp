//===- JsonReader.cpp - reading JSON objects key by key --------------------===//
//
// The diagnostics, the typed accessors of ObjectReader and the descriptions of values that
// every message uses. Parsing text into values is JsonParser.cpp's.
//
//===----------------------------------------------------------------------===//

#include "job/JsonReader.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <vector>

using namespace conduit;

std::string InputError::str() const {
  std::string text = file;
  if (!keyPath.empty())
    text += ": " + keyPath;
  return text + ": " + message;
}

void Diagnostics::report(std::string keyPath, std::string message) {
  if (!error)
    error = InputError{file, std::move(keyPath), std::move(message)};
}

void Diagnostics::adopt(const Diagnostics &other) {
  if (!error && other.error)
    error = other.error;
}

namespace {

std::string quote(std::string_view text) {
  constexpr size_t kMax = 40;
  std::string shown(text.substr(0, kMax));
  if (text.size() > kMax)
    shown += "...";
  return "\"" + shown + "\"";
}

std::string formatNumber(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", value);
  return buffer;
}

std::string listChoices(absl::Span<const std::string_view> choices) {
  std::string text;
  for (size_t i = 0; i < choices.size(); ++i)
    text += (i ? ", " : "") + quote(choices[i]);
  return text;
}

/// Levenshtein distance: insertions, deletions and replacements.
size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t above = row[j];
      row[j] = std::min({row[j - 1] + 1, above + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

/// " (did you mean "X"?)" for the closest candidate within a small edit distance, else "".
std::string suggestion(std::string_view word, absl::Span<const std::string_view> candidates) {
  std::string_view best;
  size_t bestDistance = 3; // suggest only candidates within two edits
  for (std::string_view candidate : candidates) {
    const size_t distance = editDistance(word, candidate);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best.empty() ? "" : " (did you mean " + quote(best) + "?)";
}

} // namespace

std::optional<int64_t> conduit::jsonInteger(const Json &value) {
  if (value.is_number_integer() && !value.is_number_unsigned())
    return value.get<int64_t>();
  if (value.is_number_unsigned()) {
    const uint64_t u = value.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()))
      return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (!value.is_number_float())
    return std::nullopt;
  // A double is an integer when it is whole and in [-2^63, 2^63): 2^63 itself is not.
  const double d = value.get<double>();
  if (!std::isfinite(d) || std::trunc(d) != d || d < -0x1p63 || d >= 0x1p63)
    return std::nullopt;
  return static_cast<int64_t>(d);
}

std::string conduit::describeJson(const Json &value) {
  switch (value.type()) {
  case Json::value_t::null:
    return "null";
  case Json::value_t::boolean:
    return value.get<bool>() ? "true" : "false";
  case Json::value_t::number_integer:
  case Json::value_t::number_unsigned:
  case Json::value_t::number_float:
    if (std::optional<int64_t> i = jsonInteger(value))
      return std::to_string(*i);
    return formatNumber(value.get<double>());
  case Json::value_t::string:
    return quote(value.get_ref<const std::string &>());
  case Json::value_t::array:
    return "an array";
  case Json::value_t::object:
    return "an object";
  default:
    return "a value";
  }
}

std::optional<int64_t> conduit::readInteger(const Json &value, const std::string &keyPath,
                                            int64_t min, int64_t max, Diagnostics &diag) {
  std::optional<int64_t> i = jsonInteger(value);
  if (!i) {
    diag.report(keyPath, "expected an integer, got " + describeJson(value));
    return std::nullopt;
  }
  if (*i < min || *i > max) {
    diag.report(keyPath, "must be between " + std::to_string(min) + " and " + std::to_string(max) +
                             ", got " + std::to_string(*i));
    return std::nullopt;
  }
  return i;
}

ObjectReader::ObjectReader(const Json &object, std::string path, Diagnostics &diag)
    : obj(object.get_ref<const Json::object_t &>()), path(std::move(path)), diag(diag) {}

std::string ObjectReader::keyPath(std::string_view key) const {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

std::string ObjectReader::elementPath(std::string_view key, size_t index) const {
  return keyPath(key) + "[" + std::to_string(index) + "]";
}

const Json *ObjectReader::lookup(std::string_view key) {
  if (seen.find(key) == seen.end())
    seen.emplace(key);
  if (diag.failed())
    return nullptr;
  auto it = obj.find(key);
  return it == obj.end() ? nullptr : &it->second;
}

void ObjectReader::typeError(std::string_view key, std::string_view expected, const Json &got) {
  diag.report(keyPath(key), "expected " + std::string(expected) + ", got " + describeJson(got));
}

std::optional<int64_t> ObjectReader::integer(std::string_view key, int64_t min, int64_t max) {
  const Json *value = lookup(key);
  if (!value)
    return std::nullopt;
  return readInteger(*value, keyPath(key), min, max, diag);
}

std::optional<double> ObjectReader::number(std::string_view key, double min, double max,
                                           bool minExclusive) {
  const Json *value = lookup(key);
  if (!value)
    return std::nullopt;
  if (!value->is_number() || !std::isfinite(value->get<double>())) {
    typeError(key, "a number", *value);
    return std::nullopt;
  }
  const double d = value->get<double>();
  const bool belowMin = minExclusive ? d <= min : d < min;
  if (belowMin || d > max) {
    diag.report(keyPath(key), "must be in " + std::string(minExclusive ? "(" : "[") +
                                  formatNumber(min) + ", " + formatNumber(max) + "], got " +
                                  formatNumber(d));
    return std::nullopt;
  }
  return d;
}

std::optional<bool> ObjectReader::boolean(std::string_view key) {
  const Json *value = lookup(key);
  if (!value)
    return std::nullopt;
  if (!value->is_boolean()) {
    typeError(key, "true or false", *value);
    return std::nullopt;
  }
  return value->get<bool>();
}

std::optional<std::string> ObjectReader::string(std::string_view key) {
  const Json *value = lookup(key);
  if (!value)
    return std::nullopt;
  if (!value->is_string()) {
    typeError(key, "a string", *value);
    return std::nullopt;
  }
  const std::string &s = value->get_ref<const std::string &>();
  if (s.empty()) {
    diag.report(keyPath(key), "must not be empty");
    return std::nullopt;
  }
  return s;
}

std::optional<size_t> ObjectReader::choice(std::string_view key,
                                           absl::Span<const std::string_view> choices) {
  const Json *value = lookup(key);
  if (!value)
    return std::nullopt;
  if (!value->is_string()) {
    typeError(key, "one of " + listChoices(choices), *value);
    return std::nullopt;
  }
  const std::string &s = value->get_ref<const std::string &>();
  for (size_t i = 0; i < choices.size(); ++i)
    if (s == choices[i])
      return i;
  diag.report(keyPath(key), "unknown value " + quote(s) + "; expected one of " +
                                listChoices(choices) + suggestion(s, choices));
  return std::nullopt;
}

const Json *ObjectReader::object(std::string_view key) {
  const Json *value = lookup(key);
  if (!value)
    return nullptr;
  if (!value->is_object()) {
    typeError(key, "an object", *value);
    return nullptr;
  }
  return value;
}

const Json *ObjectReader::array(std::string_view key) {
  const Json *value = lookup(key);
  if (!value)
    return nullptr;
  if (!value->is_array()) {
    typeError(key, "an array", *value);
    return nullptr;
  }
  return value;
}

const Json *ObjectReader::value(std::string_view key) { return lookup(key); }

bool ObjectReader::require(std::string_view key) {
  if (seen.find(key) == seen.end())
    seen.emplace(key);
  if (diag.failed())
    return false;
  if (obj.find(key) != obj.end())
    return true;
  diag.report(keyPath(key), "missing required key");
  return false;
}

void ObjectReader::rejectUnknownKeys() {
  if (diag.failed())
    return;
  std::vector<std::string_view> unknown, known;
  for (const auto &[key, value] : obj)
    if (seen.find(key) == seen.end())
      unknown.push_back(key);
  if (unknown.empty())
    return;
  known.assign(seen.begin(), seen.end());
  std::sort(unknown.begin(), unknown.end());
  std::sort(known.begin(), known.end());
  diag.report(keyPath(unknown.front()), "unknown key" + suggestion(unknown.front(), known) +
                                            "; expected one of " + listChoices(known));
}
