//===- JsonReader.h - validated reading of JSON input files -----*- C++ -*-===//
//
// Every JSON file Conduit reads (job files, Hugging Face configs, profiles) is untrusted input.
// loadJsonFile and parseJsonText turn such text into a `Json` value (nlohmann::json). The
// parsing is nlohmann's: its parser refuses what is not JSON, text that is not UTF-8 included,
// and says where. Around it are the guards it does not have: the size limit, checked before
// parsing; the nesting-depth limit, refused at the bracket that passes it, so that nothing
// deeper is built (the parser keeps its own stack and a value is destroyed without recursion,
// but copying, comparing and writing one recurse); a key given twice in one object, refused
// with its name and line. Numbers are int64, then uint64, then double, as the parser reads
// them; one too large for a double is refused. ObjectReader then reads one object key by key
// with types and ranges, recording the first problem as a diagnostic that names the file, the
// key path and what was expected. Keys an ObjectReader never asked for are reported as
// unknown, with the closest known key.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_JOB_JSONREADER_H
#define CONDUIT_JOB_JSONREADER_H

#include "absl/types/span.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>

namespace conduit {

/// A JSON value: what the readers take, and what the key editor and the tuner edit.
using Json = nlohmann::json;

/// The first problem found in an input file.
struct InputError {
  std::string file;
  std::string keyPath; // empty for file-level problems
  std::string message;

  /// "FILE: KEY: MESSAGE", or "FILE: MESSAGE" without a key.
  std::string str() const;
  /// The same without the file, for a caller that names it itself.
  std::string withoutFile() const;
};

/// Collects at most one error: the first one wins, later reads become no-ops.
class Diagnostics {
public:
  explicit Diagnostics(std::string file) : file(std::move(file)) {}
  void report(std::string keyPath, std::string message);
  /// Takes over the error of a diagnostics object for another file (an included file).
  void adopt(const Diagnostics &other);
  bool failed() const { return error.has_value(); }
  const std::optional<InputError> &getError() const { return error; }
  const std::string &getFile() const { return file; }

private:
  std::string file;
  std::optional<InputError> error;
};

/// Limits on a JSON input: its size, checked before parsing, and its nesting depth.
struct JsonLimits {
  uint64_t maxBytes = 16 << 20;
  unsigned maxDepth = 64;
};

/// Reads and parses `path`; on failure reports to `diag` and returns nullopt.
std::optional<Json> loadJsonFile(std::string_view path, Diagnostics &diag, JsonLimits limits = {});

/// Parses `text` (already in memory) with the same guards. Syntax errors read "invalid JSON at
/// line L, column C: REASON": L and C (in bytes, from 1) place the byte at which the parser
/// found the problem, one past the end for text that stops early; REASON is nlohmann's own
/// description, a long token it quotes shortened. Too deep: "JSON nesting is deeper than N
/// levels"; a key twice: "duplicate key "K" at line L".
std::optional<Json> parseJsonText(std::string_view text, Diagnostics &diag, JsonLimits limits = {});

/// `value` as text, indented by `indent` spaces per level (-1: one line), keys sorted. Bytes
/// that are not UTF-8 (a key or value given on a command line) are written as U+FFFD.
std::string writeJson(const Json &value, int indent = 2);

/// `text` with what is not UTF-8 replaced by U+FFFD, as writeJson writes it (one U+FFFD for each
/// stray byte or each sequence cut short).
std::string fixUtf8(std::string_view text);

/// Reads the keys of one JSON object. Accessors return nullopt when the key is absent or
/// invalid; invalid values are reported to the shared Diagnostics.
class ObjectReader {
public:
  /// `object` must be a JSON object.
  ObjectReader(const Json &object, std::string path, Diagnostics &diag);

  /// An integer in [min, max].
  std::optional<int64_t> integer(std::string_view key, int64_t min, int64_t max);
  /// A finite number in [min, max], or (min, max] when `minExclusive`.
  std::optional<double> number(std::string_view key, double min, double max,
                               bool minExclusive = false);
  std::optional<bool> boolean(std::string_view key);
  /// A non-empty string.
  std::optional<std::string> string(std::string_view key);
  /// One of `choices` (spelled as in the file); returns its index.
  std::optional<size_t> choice(std::string_view key, absl::Span<const std::string_view> choices);
  /// An object or an array (null when absent or of another type, which is reported).
  const Json *object(std::string_view key);
  const Json *array(std::string_view key);
  /// The raw value, for keys that accept several types.
  const Json *value(std::string_view key);

  /// Reports a missing key unless it is present.
  bool require(std::string_view key);
  /// Reports keys that were never read. Call once all keys were asked for.
  void rejectUnknownKeys();

  /// Path of `key` inside this object, e.g. "parallelism.pipeline".
  std::string keyPath(std::string_view key) const;
  /// Path of element `index` of array `key`, e.g. "model.layers[3]".
  std::string elementPath(std::string_view key, size_t index) const;
  Diagnostics &getDiagnostics() { return diag; }
  bool failed() const { return diag.failed(); }

private:
  const Json *lookup(std::string_view key);
  void typeError(std::string_view key, std::string_view expected, const Json &got);

  const Json::object_t &obj;
  std::string path;
  Diagnostics &diag;
  std::set<std::string, std::less<>> seen;
};

/// The value as an int64 when it is a whole number that fits, else nullopt (the double 2^63,
/// written say as `9223372036854775807.0`, does not).
std::optional<int64_t> jsonInteger(const Json &value);

/// A short description of a JSON value for diagnostics: `"abc"`, `12`, `an object`, ...
std::string describeJson(const Json &value);

/// Reads an integer in [min, max] from an array element (or any value) at `keyPath`.
std::optional<int64_t> readInteger(const Json &value, const std::string &keyPath, int64_t min,
                                   int64_t max, Diagnostics &diag);

} // namespace conduit

#endif // CONDUIT_JOB_JSONREADER_H
