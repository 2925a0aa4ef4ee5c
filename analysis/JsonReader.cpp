//===- JsonReader.cpp - validated reading of JSON input files -------------===//

#include "analysis/JsonReader.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/Error.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

using namespace conduit;
namespace json = llvm::json;

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

/// Checks what llvm::json does not: nesting depth (its parser recurses once per level, so a
/// hostile file could exhaust the stack) and duplicate keys (it keeps one silently). Keys are
/// compared as written, escapes included. Returns a description of the first problem.
std::optional<std::string> checkStructure(llvm::StringRef text, unsigned maxDepth) {
  struct Level {
    bool isObject;
    llvm::StringSet<> keys;
  };
  llvm::SmallVector<Level, 16> levels;
  size_t line = 1, stringStart = 0;
  llvm::StringRef lastString;
  bool inString = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '\n')
      ++line;
    if (inString) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"') {
        inString = false;
        lastString = text.slice(stringStart, i);
      }
      continue;
    }
    switch (c) {
    case '"':
      inString = true;
      stringStart = i + 1;
      break;
    case '[':
    case '{':
      if (levels.size() >= maxDepth)
        return "JSON nesting is deeper than " + std::to_string(maxDepth) + " levels";
      levels.push_back({c == '{', {}});
      break;
    case ']':
    case '}':
      if (!levels.empty())
        levels.pop_back();
      break;
    case ':':
      if (!levels.empty() && levels.back().isObject &&
          !levels.back().keys.insert(lastString).second)
        return "duplicate key \"" + lastString.str() + "\" at line " + std::to_string(line);
      break;
    default:
      break;
    }
  }
  return std::nullopt;
}

/// Turns llvm::json's "[L:C, byte=B]: Msg" into "line L, column C: msg".
std::string describeParseError(llvm::Error error) {
  std::string raw = llvm::toString(std::move(error));
  llvm::StringRef text(raw);
  if (text.consume_front("[")) {
    auto [position, rest] = text.split("]: ");
    auto [lineColumn, byte] = position.split(", ");
    auto [line, column] = lineColumn.split(':');
    std::string message = rest.str();
    if (!message.empty())
      message[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(message[0])));
    return "invalid JSON at line " + line.str() + ", column " + column.str() + ": " + message;
  }
  return "invalid JSON: " + raw;
}

std::string quote(llvm::StringRef text) {
  constexpr size_t kMax = 40;
  std::string shown = text.size() > kMax ? text.take_front(kMax).str() + "..." : text.str();
  return "\"" + shown + "\"";
}

std::string formatNumber(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", value);
  return buffer;
}

std::string listChoices(llvm::ArrayRef<llvm::StringRef> choices) {
  std::string text;
  for (auto [i, choice] : llvm::enumerate(choices))
    text += (i ? ", " : "") + quote(choice);
  return text;
}

/// " (did you mean "X"?)" for the closest candidate within a small edit distance, else "".
std::string suggestion(llvm::StringRef word, llvm::ArrayRef<llvm::StringRef> candidates) {
  llvm::StringRef best;
  unsigned bestDistance = 3; // suggest only candidates within two edits
  for (llvm::StringRef candidate : candidates) {
    unsigned distance = word.edit_distance(candidate, /*AllowReplacements=*/true, bestDistance);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best.empty() ? "" : " (did you mean " + quote(best) + "?)";
}

} // namespace

std::optional<json::Value> conduit::parseJsonText(llvm::StringRef text, Diagnostics &diag,
                                                  JsonLimits limits) {
  if (text.size() > limits.maxBytes) {
    diag.report("", "file is " + std::to_string(text.size()) +
                        " bytes; input files are limited "
                        "to " +
                        std::to_string(limits.maxBytes) + " bytes");
    return std::nullopt;
  }
  if (std::optional<std::string> problem = checkStructure(text, limits.maxDepth)) {
    diag.report("", *problem);
    return std::nullopt;
  }
  llvm::Expected<json::Value> value = json::parse(text);
  if (!value) {
    diag.report("", describeParseError(value.takeError()));
    return std::nullopt;
  }
  return std::move(*value);
}

std::optional<json::Value> conduit::loadJsonFile(llvm::StringRef path, Diagnostics &diag,
                                                 JsonLimits limits) {
  llvm::sys::fs::file_status status;
  if (std::error_code ec = llvm::sys::fs::status(path, status)) {
    diag.report("", "cannot read file: " + ec.message());
    return std::nullopt;
  }
  if (!llvm::sys::fs::is_regular_file(status)) {
    diag.report("", "not a regular file");
    return std::nullopt;
  }
  if (status.getSize() > limits.maxBytes) {
    diag.report("", "file is " + std::to_string(status.getSize()) +
                        " bytes; input files are "
                        "limited to " +
                        std::to_string(limits.maxBytes) + " bytes");
    return std::nullopt;
  }
  llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> buffer =
      llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!buffer) {
    diag.report("", "cannot read file: " + buffer.getError().message());
    return std::nullopt;
  }
  return parseJsonText((*buffer)->getBuffer(), diag, limits);
}

std::optional<int64_t> conduit::jsonInteger(const json::Value &value) {
  std::optional<double> number = value.getAsNumber();
  if (!number)
    return std::nullopt;
  // Integers stored as integers convert exactly; a double is whole and in range only below 2^63.
  if (*number >= 0x1p63 && !value.getAsUINT64())
    return std::nullopt;
  return value.getAsInteger();
}

std::string conduit::describeJson(const json::Value &value) {
  switch (value.kind()) {
  case json::Value::Null:
    return "null";
  case json::Value::Boolean:
    return *value.getAsBoolean() ? "true" : "false";
  case json::Value::Number:
    if (std::optional<int64_t> i = jsonInteger(value))
      return std::to_string(*i);
    return formatNumber(*value.getAsNumber());
  case json::Value::String:
    return quote(*value.getAsString());
  case json::Value::Array:
    return "an array";
  case json::Value::Object:
    return "an object";
  }
  return "a value";
}

std::optional<int64_t> conduit::readInteger(const json::Value &value, const std::string &keyPath,
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

std::string ObjectReader::keyPath(llvm::StringRef key) const {
  return path.empty() ? key.str() : path + "." + key.str();
}

std::string ObjectReader::elementPath(llvm::StringRef key, size_t index) const {
  return keyPath(key) + "[" + std::to_string(index) + "]";
}

const json::Value *ObjectReader::lookup(llvm::StringRef key) {
  seen.insert(key);
  if (diag.failed())
    return nullptr;
  return obj.get(key);
}

void ObjectReader::typeError(llvm::StringRef key, llvm::StringRef expected,
                             const json::Value &got) {
  diag.report(keyPath(key), "expected " + expected.str() + ", got " + describeJson(got));
}

std::optional<int64_t> ObjectReader::integer(llvm::StringRef key, int64_t min, int64_t max) {
  const json::Value *value = lookup(key);
  if (!value)
    return std::nullopt;
  return readInteger(*value, keyPath(key), min, max, diag);
}

std::optional<double> ObjectReader::number(llvm::StringRef key, double min, double max,
                                           bool minExclusive) {
  const json::Value *value = lookup(key);
  if (!value)
    return std::nullopt;
  std::optional<double> d = value->getAsNumber();
  if (!d || !std::isfinite(*d)) {
    typeError(key, "a number", *value);
    return std::nullopt;
  }
  bool belowMin = minExclusive ? *d <= min : *d < min;
  if (belowMin || *d > max) {
    diag.report(keyPath(key), "must be in " + std::string(minExclusive ? "(" : "[") +
                                  formatNumber(min) + ", " + formatNumber(max) + "], got " +
                                  formatNumber(*d));
    return std::nullopt;
  }
  return d;
}

std::optional<bool> ObjectReader::boolean(llvm::StringRef key) {
  const json::Value *value = lookup(key);
  if (!value)
    return std::nullopt;
  std::optional<bool> b = value->getAsBoolean();
  if (!b)
    typeError(key, "true or false", *value);
  return b;
}

std::optional<std::string> ObjectReader::string(llvm::StringRef key) {
  const json::Value *value = lookup(key);
  if (!value)
    return std::nullopt;
  std::optional<llvm::StringRef> s = value->getAsString();
  if (!s) {
    typeError(key, "a string", *value);
    return std::nullopt;
  }
  if (s->empty()) {
    diag.report(keyPath(key), "must not be empty");
    return std::nullopt;
  }
  return s->str();
}

std::optional<size_t> ObjectReader::choice(llvm::StringRef key,
                                           llvm::ArrayRef<llvm::StringRef> choices) {
  const json::Value *value = lookup(key);
  if (!value)
    return std::nullopt;
  std::optional<llvm::StringRef> s = value->getAsString();
  if (!s) {
    typeError(key, "one of " + listChoices(choices), *value);
    return std::nullopt;
  }
  for (auto [i, c] : llvm::enumerate(choices))
    if (*s == c)
      return i;
  diag.report(keyPath(key), "unknown value " + quote(*s) + "; expected one of " +
                                listChoices(choices) + suggestion(*s, choices));
  return std::nullopt;
}

const json::Object *ObjectReader::object(llvm::StringRef key) {
  const json::Value *value = lookup(key);
  if (!value)
    return nullptr;
  const json::Object *o = value->getAsObject();
  if (!o)
    typeError(key, "an object", *value);
  return o;
}

const json::Array *ObjectReader::array(llvm::StringRef key) {
  const json::Value *value = lookup(key);
  if (!value)
    return nullptr;
  const json::Array *a = value->getAsArray();
  if (!a)
    typeError(key, "an array", *value);
  return a;
}

const json::Value *ObjectReader::value(llvm::StringRef key) { return lookup(key); }

bool ObjectReader::require(llvm::StringRef key) {
  seen.insert(key);
  if (diag.failed())
    return false;
  if (obj.get(key))
    return true;
  diag.report(keyPath(key), "missing required key");
  return false;
}

void ObjectReader::rejectUnknownKeys() {
  if (diag.failed())
    return;
  llvm::SmallVector<llvm::StringRef> unknown, known;
  for (const auto &entry : obj)
    if (!seen.contains(entry.first))
      unknown.push_back(entry.first);
  if (unknown.empty())
    return;
  for (const auto &entry : seen)
    known.push_back(entry.getKey());
  llvm::sort(unknown);
  llvm::sort(known);
  diag.report(keyPath(unknown.front()), "unknown key" + suggestion(unknown.front(), known) +
                                            "; expected one of " + listChoices(known));
}
