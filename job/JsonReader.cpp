//===- JsonReader.cpp - reading JSON files and objects key by key ---------===//
//
// Text becomes a value through nlohmann_json's parser (its SAX interface), with the guards
// around it that JsonReader.h lists; then the diagnostics, the typed accessors of
// ObjectReader and the descriptions of values that every message uses.
//
//===----------------------------------------------------------------------===//

#include "job/JsonReader.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <limits>
#include <system_error>
#include <vector>

using namespace conduit;

std::string InputError::str() const { return file + ": " + withoutFile(); }

std::string InputError::withoutFile() const {
  return keyPath.empty() ? message : keyPath + ": " + message;
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

/// `text` cut to at most `max` bytes, at a UTF-8 character boundary, with "..." when cut.
std::string shorten(std::string_view text, size_t max) {
  if (text.size() <= max)
    return std::string(text);
  size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80)
    --end; // do not split a character
  return std::string(text.substr(0, end)) + "...";
}

/// How far into the text nlohmann's parser has read: an iterator over the bytes that leaves
/// its position in `*read` at each step, so that a refusal the parser does not make itself (a
/// key given twice) can say on which line it is.
class TrackedText {
public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char *;
  using reference = const char &;

  TrackedText(const char *at, const char **read) : at(at), read(read) {}
  reference operator*() const { return *at; }
  TrackedText &operator++() {
    *read = ++at;
    return *this;
  }
  TrackedText operator++(int) {
    TrackedText before = *this;
    ++*this;
    return before;
  }
  bool operator==(const TrackedText &other) const { return at == other.at; }
  bool operator!=(const TrackedText &other) const { return at != other.at; }

private:
  const char *at;
  const char **read;
};

/// Builds the value from the events of nlohmann's parser, and refuses what that parser
/// accepts: an array or object that opens deeper than the limit (the parse stops at its
/// bracket, so the value's depth bounds whatever walks it recursively: copying, comparing,
/// writing) and a key given twice in one object (which would silently keep one value).
/// Everything else (syntax, strings, UTF-8, numbers) is the parser's; a syntax error keeps
/// its description, placed by the byte at which the parser found it.
class ValueBuilder final : public Json::json_sax_t {
public:
  ValueBuilder(std::string_view text, const char *const &read, unsigned maxDepth)
      : text(text), read(read), maxDepth(maxDepth) {}

  bool null() override { return add(nullptr); }
  bool boolean(bool value) override { return add(value); }
  bool number_integer(number_integer_t value) override { return add(value); }
  bool number_unsigned(number_unsigned_t value) override { return add(value); }
  bool number_float(number_float_t value, const string_t &) override { return add(value); }
  bool string(string_t &value) override { return add(std::move(value)); }
  bool binary(binary_t &) override { return refuse("binary data is not JSON text"); }

  bool start_object(std::size_t) override { return open(Json::object()); }
  bool key(string_t &name) override {
    auto [it, added] = levels.back()->get_ref<Json::object_t &>().try_emplace(std::move(name));
    if (!added)
      return refuse("duplicate key " + Json(shorten(name, kShown)).dump() + " at line " +
                    std::to_string(lineOf(static_cast<size_t>(read - text.data()))));
    slot = &it->second;
    return true;
  }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(Json::array()); }
  bool end_array() override { return close(); }

  bool parse_error(std::size_t position, const std::string &token,
                   const Json::exception &error) override {
    // `position` counts the bytes read, the one that showed the problem included (one past
    // the end when the text stops early).
    const size_t at = std::min<size_t>(position ? position - 1 : 0, text.size());
    const size_t newline = at ? text.rfind('\n', at - 1) : std::string_view::npos;
    const size_t column = at - (newline == std::string_view::npos ? 0 : newline + 1) + 1;
    return refuse("invalid JSON at line " + std::to_string(lineOf(at)) + ", column " +
                  std::to_string(column) + ": " + describe(error, token));
  }

  Json value;
  std::string problem;

private:
  static constexpr size_t kShown = 40; // bytes of a key or token quoted in a message

  /// The line (from 1) of the byte at offset `at`.
  size_t lineOf(size_t at) const {
    return 1 + static_cast<size_t>(std::count(text.begin(), text.begin() + at, '\n'));
  }

  /// nlohmann's description of the error without its "[json.exception.parse_error.101] parse
  /// error at line L, column C: " prefix, the token it quotes shortened, as valid UTF-8 (the
  /// token may hold the bytes that are not).
  static std::string describe(const Json::exception &error, const std::string &token) {
    std::string text = error.what();
    if (text.rfind("[json.exception.", 0) == 0)
      if (const size_t end = text.find("] "); end != std::string::npos)
        text.erase(0, end + 2);
    if (text.rfind("parse error", 0) == 0)
      if (const size_t end = text.find(": "); end != std::string::npos)
        text.erase(0, end + 2);
    if (token.size() > kShown)
      if (const size_t at = text.find("'" + token + "'"); at != std::string::npos)
        text.replace(at + 1, token.size(), shorten(token, kShown));
    return fixUtf8(text);
  }

  bool refuse(std::string why) {
    problem = std::move(why);
    return false;
  }

  /// Puts `v` where the parser is: the whole value, the next element of the open array or the
  /// value of the key just read.
  Json *place(Json v) {
    if (levels.empty()) {
      value = std::move(v);
      return &value;
    }
    Json &container = *levels.back();
    if (container.is_array()) {
      container.get_ref<Json::array_t &>().push_back(std::move(v));
      return &container.back();
    }
    *slot = std::move(v);
    return slot;
  }
  bool add(Json v) {
    place(std::move(v));
    return true;
  }
  bool open(Json empty) {
    if (levels.size() >= maxDepth)
      return refuse("JSON nesting is deeper than " + std::to_string(maxDepth) + " levels");
    levels.push_back(place(std::move(empty)));
    return true;
  }
  bool close() {
    levels.pop_back();
    return true;
  }

  std::string_view text;
  const char *const &read; // where the parser has got to
  unsigned maxDepth;
  std::vector<Json *> levels; // the open arrays and objects, outermost first
  Json *slot = nullptr;       // the value of the key just read
};

std::string sizeMessage(uint64_t size, uint64_t limit) {
  return "file is " + std::to_string(size) + " bytes; input files are limited to " +
         std::to_string(limit) + " bytes";
}

} // namespace

std::string conduit::fixUtf8(std::string_view text) {
  // The writer replaces what is not UTF-8; reading its output back undoes its escapes.
  return Json::parse(writeJson(Json(std::string(text)), -1)).get<std::string>();
}

std::string conduit::writeJson(const Json &value, int indent) {
  return value.dump(indent, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}

std::optional<Json> conduit::parseJsonText(std::string_view text, Diagnostics &diag,
                                           JsonLimits limits) {
  if (text.size() > limits.maxBytes) {
    diag.report("", sizeMessage(text.size(), limits.maxBytes));
    return std::nullopt;
  }
  const char *read = text.data();
  ValueBuilder builder(text, read, limits.maxDepth);
  if (!Json::sax_parse(TrackedText(text.data(), &read),
                       TrackedText(text.data() + text.size(), &read), &builder)) {
    diag.report("", builder.problem.empty() ? "invalid JSON" : builder.problem);
    return std::nullopt;
  }
  return std::move(builder.value);
}

std::optional<Json> conduit::loadJsonFile(std::string_view path, Diagnostics &diag,
                                          JsonLimits limits) {
  const std::string name(path);
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(name, ec);
  if (ec) {
    diag.report("", "cannot read file: " + ec.message());
    return std::nullopt;
  }
  if (!std::filesystem::is_regular_file(status)) {
    diag.report("", "not a regular file");
    return std::nullopt;
  }
  const uint64_t size = std::filesystem::file_size(name, ec);
  if (ec) {
    diag.report("", "cannot read file: " + ec.message());
    return std::nullopt;
  }
  if (size > limits.maxBytes) {
    diag.report("", sizeMessage(size, limits.maxBytes));
    return std::nullopt;
  }
  std::FILE *file = std::fopen(name.c_str(), "rb");
  if (!file) {
    diag.report("", "cannot read file: " + std::generic_category().message(errno));
    return std::nullopt;
  }
  // Read to the end: the file may have changed since its size was taken.
  std::string text;
  char buffer[1 << 16];
  size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file)) > 0 && text.size() <= limits.maxBytes)
    text.append(buffer, n);
  const bool failed = std::ferror(file);
  const int error = errno;
  std::fclose(file);
  if (failed) {
    diag.report("", "cannot read file: " + std::generic_category().message(error));
    return std::nullopt;
  }
  return parseJsonText(text, diag, limits);
}

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
