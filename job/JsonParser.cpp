//===- JsonParser.cpp - JSON text into values, with guards ----------------===//
//
// A strict JSON parser (RFC 8259 values, UTF-8 text) that says where the first problem is, as
// "line L, column C" (C in bytes from 0), so that a user can find it in the file. Before any
// of it runs, the text's size, its nesting depth and its objects' keys are checked: the parser
// recurses once per level, so the depth limit also bounds its stack, and a key given twice
// would silently keep one of its values. Numbers are kept as written where they fit: int64,
// then uint64, then double (a double too large for one is infinite, and readers refuse it).
//
//===----------------------------------------------------------------------===//

#include "job/JsonReader.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <unordered_set>
#include <vector>

using namespace conduit;

namespace {

/// The length of the UTF-8 sequence at `text[i]`, or 0 when none starts there (a stray
/// continuation byte, an overlong form, a surrogate, a code point above U+10FFFF, a sequence
/// cut short).
size_t utf8Length(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const unsigned char lead = byte(i);
  if (lead < 0x80)
    return 1;
  size_t length = 0;
  unsigned char low = 0x80, high = 0xBF; // the range of the second byte
  if (lead >= 0xC2 && lead <= 0xDF) {
    length = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    length = 3;
    if (lead == 0xE0)
      low = 0xA0;
    else if (lead == 0xED)
      high = 0x9F;
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    length = 4;
    if (lead == 0xF0)
      low = 0x90;
    else if (lead == 0xF4)
      high = 0x8F;
  } else {
    return 0;
  }
  if (text.size() - i < length || byte(i + 1) < low || byte(i + 1) > high)
    return 0;
  for (size_t k = 2; k < length; ++k)
    if (byte(i + k) < 0x80 || byte(i + k) > 0xBF)
      return 0;
  return length;
}

/// The offset of the first byte that does not start a valid UTF-8 sequence, if any.
std::optional<size_t> firstInvalidUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const size_t length = utf8Length(text, i);
    if (!length)
      return i;
    i += length;
  }
  return std::nullopt;
}

void appendUtf8(uint32_t codePoint, std::string &out) {
  if (codePoint < 0x80) {
    out += static_cast<char>(codePoint);
  } else if (codePoint < 0x800) {
    out += static_cast<char>(0xC0 | (codePoint >> 6));
    out += static_cast<char>(0x80 | (codePoint & 0x3F));
  } else if (codePoint < 0x10000) {
    out += static_cast<char>(0xE0 | (codePoint >> 12));
    out += static_cast<char>(0x80 | ((codePoint >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (codePoint & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (codePoint >> 18));
    out += static_cast<char>(0x80 | ((codePoint >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((codePoint >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (codePoint & 0x3F));
  }
}

constexpr uint32_t kReplacement = 0xFFFD;

/// Checks what the parser does not: nesting depth and duplicate keys. Keys are compared as
/// written, escapes included. Returns a description of the first problem.
std::optional<std::string> checkStructure(std::string_view text, unsigned maxDepth) {
  struct Level {
    bool isObject;
    std::unordered_set<std::string_view> keys;
  };
  std::vector<Level> levels;
  size_t line = 1, stringStart = 0;
  std::string_view lastString;
  bool inString = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n')
      ++line;
    if (inString) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"') {
        inString = false;
        lastString = text.substr(stringStart, i - stringStart);
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
        return "duplicate key \"" + std::string(lastString) + "\" at line " + std::to_string(line);
      break;
    default:
      break;
    }
  }
  return std::nullopt;
}

/// Recursive descent over text whose depth checkStructure has bounded. On the first problem
/// it stops with the problem and the offset where it was noticed.
class TextParser {
public:
  explicit TextParser(std::string_view text) : text(text) {}

  bool parseDocument(Json &out) {
    if (std::optional<size_t> bad = firstInvalidUtf8(text)) {
      pos = *bad;
      return fail("invalid UTF-8 sequence");
    }
    if (!parseValue(out))
      return false;
    skipSpace();
    return pos == text.size() || fail("text after end of document");
  }

  /// "invalid JSON at line L, column C: problem".
  std::string error() const {
    size_t line = 1, lineStart = 0;
    for (size_t i = 0; i < pos; ++i)
      if (text[i] == '\n') {
        ++line;
        lineStart = i + 1;
      }
    return "invalid JSON at line " + std::to_string(line) + ", column " +
           std::to_string(pos - lineStart) + ": " + problem;
  }

private:
  /// The next character, consumed; 0 at the end (where nothing is consumed).
  char next() { return pos == text.size() ? 0 : text[pos++]; }
  char peek() const { return pos == text.size() ? 0 : text[pos]; }
  void skipSpace() {
    while (pos < text.size() &&
           (text[pos] == ' ' || text[pos] == '\n' || text[pos] == '\r' || text[pos] == '\t'))
      ++pos;
  }
  bool fail(const char *message) {
    problem = message;
    return false;
  }
  /// Consumes `rest` (the literal after its first character) or fails with `message`.
  bool literal(const char *rest, const char *message) {
    for (const char *c = rest; *c; ++c)
      if (next() != *c)
        return fail(message);
    return true;
  }
  static bool isNumberChar(char c) {
    return (c >= '0' && c <= '9') || c == 'e' || c == 'E' || c == '+' || c == '-' || c == '.';
  }

  bool parseValue(Json &out);
  bool parseNumber(char first, Json &out);
  bool parseString(std::string &out);
  bool parseEscapedUnits(std::string &out);
  bool parseHex4(uint16_t &unit);

  std::string_view text;
  size_t pos = 0;
  const char *problem = "";
};

bool TextParser::parseValue(Json &out) {
  skipSpace();
  if (pos == text.size())
    return fail("unexpected EOF");
  const char c = next();
  switch (c) {
  case 'n':
    out = nullptr;
    return literal("ull", "invalid JSON value (null?)");
  case 't':
    out = true;
    return literal("rue", "invalid JSON value (true?)");
  case 'f':
    out = false;
    return literal("alse", "invalid JSON value (false?)");
  case '"': {
    std::string s;
    if (!parseString(s))
      return false;
    out = std::move(s);
    return true;
  }
  case '[': {
    out = Json::array();
    skipSpace();
    if (peek() == ']') {
      ++pos;
      return true;
    }
    while (true) {
      out.push_back(nullptr);
      if (!parseValue(out.back()))
        return false;
      skipSpace();
      switch (next()) {
      case ',':
        skipSpace();
        continue;
      case ']':
        return true;
      default:
        return fail("expected , or ] after array element");
      }
    }
  }
  case '{': {
    out = Json::object();
    skipSpace();
    if (peek() == '}') {
      ++pos;
      return true;
    }
    while (true) {
      if (next() != '"')
        return fail("expected object key");
      std::string key;
      if (!parseString(key))
        return false;
      skipSpace();
      if (next() != ':')
        return fail("expected : after object key");
      skipSpace();
      // A key given twice (escaped differently, so checkStructure let it through) keeps its
      // last value.
      if (!parseValue(out[key]))
        return false;
      skipSpace();
      switch (next()) {
      case ',':
        skipSpace();
        continue;
      case '}':
        return true;
      default:
        return fail("expected , or } after object property");
      }
    }
  }
  default:
    if (isNumberChar(c))
      return parseNumber(c, out);
    return fail("invalid JSON value");
  }
}

bool TextParser::parseNumber(char first, Json &out) {
  std::string digits(1, first);
  while (isNumberChar(peek()))
    digits += next();
  const char *begin = digits.c_str(), *end = begin + digits.size();
  char *stop = nullptr;
  // An integer keeps all 64 bits; anything else is a double.
  errno = 0;
  const long long i = std::strtoll(begin, &stop, 10);
  if (stop == end && errno != ERANGE) {
    out = static_cast<int64_t>(i);
    return true;
  }
  if (first != '-') {
    errno = 0;
    const unsigned long long u = std::strtoull(begin, &stop, 10);
    if (stop == end && errno != ERANGE) {
      out = static_cast<uint64_t>(u);
      return true;
    }
  }
  out = std::strtod(begin, &stop);
  return stop == end || fail("invalid JSON value (number?)");
}

bool TextParser::parseString(std::string &out) {
  // The opening quote is consumed.
  for (char c = next(); c != '"'; c = next()) {
    if (pos == text.size())
      return fail("unterminated string");
    if ((c & 0x1f) == c)
      return fail("control character in string");
    if (c != '\\') {
      out += c;
      continue;
    }
    switch (c = next()) {
    case '"':
    case '\\':
    case '/':
      out += c;
      break;
    case 'b':
      out += '\b';
      break;
    case 'f':
      out += '\f';
      break;
    case 'n':
      out += '\n';
      break;
    case 'r':
      out += '\r';
      break;
    case 't':
      out += '\t';
      break;
    case 'u':
      if (!parseEscapedUnits(out))
        return false;
      break;
    default:
      return fail("invalid escape sequence");
    }
  }
  return true;
}

bool TextParser::parseHex4(uint16_t &unit) {
  // All four characters are consumed before any is checked.
  const char digits[] = {next(), next(), next(), next()};
  unit = 0;
  for (char c : digits) {
    const unsigned char d = static_cast<unsigned char>(c);
    if (!std::isxdigit(d))
      return fail("invalid \\u escape sequence");
    unit = static_cast<uint16_t>(unit << 4 | (d <= '9' ? d - '0' : (d | 0x20) - 'a' + 10));
  }
  return true;
}

bool TextParser::parseEscapedUnits(std::string &out) {
  // One \uXXXX is consumed ("\u" included) when this starts. Unpaired surrogates are valid
  // JSON (RFC 8259 §8.2) but not Unicode: each becomes U+FFFD.
  uint16_t unit = 0;
  if (!parseHex4(unit))
    return false;
  while (true) {
    if (unit < 0xD800 || unit >= 0xE000) {
      appendUtf8(unit, out);
      return true;
    }
    if (unit >= 0xDC00) { // a trailing surrogate on its own
      appendUtf8(kReplacement, out);
      return true;
    }
    // A leading surrogate: its pair must follow as another \u escape.
    if (text.size() - pos < 2 || text[pos] != '\\' || text[pos + 1] != 'u') {
      appendUtf8(kReplacement, out);
      return true;
    }
    pos += 2;
    uint16_t trailing = 0;
    if (!parseHex4(trailing))
      return false;
    if (trailing < 0xDC00 || trailing >= 0xE000) {
      // Not a pair: the leading one is replaced, the second escape read on its own.
      appendUtf8(kReplacement, out);
      unit = trailing;
      continue;
    }
    appendUtf8(0x10000 + ((uint32_t(unit) - 0xD800) << 10) + (trailing - 0xDC00), out);
    return true;
  }
}

std::string sizeMessage(uint64_t size, uint64_t limit) {
  return "file is " + std::to_string(size) + " bytes; input files are limited to " +
         std::to_string(limit) + " bytes";
}

} // namespace

std::string conduit::fixUtf8(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (const size_t length = utf8Length(text, i)) {
      out.append(text.substr(i, length));
      i += length;
    } else {
      appendUtf8(kReplacement, out);
      ++i;
    }
  }
  return out;
}

std::optional<Json> conduit::parseJsonText(std::string_view text, Diagnostics &diag,
                                           JsonLimits limits) {
  if (text.size() > limits.maxBytes) {
    diag.report("", sizeMessage(text.size(), limits.maxBytes));
    return std::nullopt;
  }
  if (std::optional<std::string> problem = checkStructure(text, limits.maxDepth)) {
    diag.report("", *problem);
    return std::nullopt;
  }
  TextParser parser(text);
  Json value;
  if (!parser.parseDocument(value)) {
    diag.report("", parser.error());
    return std::nullopt;
  }
  return value;
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

std::string conduit::writeJson(const Json &value, int indent) {
  return value.dump(indent, ' ', /*ensure_ascii=*/false, Json::error_handler_t::replace);
}
