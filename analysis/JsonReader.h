//===- JsonReader.h - validated reading of JSON input files -----*- C++ -*-===//
//
// Every JSON file Conduit reads (job files, Hugging Face configs, profiles) is untrusted input.
// JsonReader loads a file with guards against what llvm::json does not check (size, nesting
// depth), and ObjectReader reads one object key by key with types and ranges, recording the
// first problem as a diagnostic that names the file, the key path and what was expected.
// Keys an ObjectReader never asked for are reported as unknown, with the closest known key.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_ANALYSIS_JSONREADER_H
#define CONDUIT_ANALYSIS_JSONREADER_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/JSON.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace conduit {

/// The first problem found in an input file.
struct InputError {
  std::string file;
  std::string keyPath; // empty for file-level problems
  std::string message;

  /// "FILE: KEY: MESSAGE", or "FILE: MESSAGE" without a key.
  std::string str() const;
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

/// Limits on what a JSON input may be before it is parsed.
struct JsonLimits {
  uint64_t maxBytes = 16 << 20;
  unsigned maxDepth = 64;
};

/// Reads and parses `path`; on failure reports to `diag` and returns nullopt.
std::optional<llvm::json::Value> loadJsonFile(llvm::StringRef path, Diagnostics &diag,
                                              JsonLimits limits = {});

/// Parses `text` (already in memory) with the same guards.
std::optional<llvm::json::Value> parseJsonText(llvm::StringRef text, Diagnostics &diag,
                                               JsonLimits limits = {});

/// Reads the keys of one JSON object. Accessors return nullopt when the key is absent or
/// invalid; invalid values are reported to the shared Diagnostics.
class ObjectReader {
public:
  ObjectReader(const llvm::json::Object &object, std::string path, Diagnostics &diag)
      : obj(object), path(std::move(path)), diag(diag) {}

  /// An integer in [min, max].
  std::optional<int64_t> integer(llvm::StringRef key, int64_t min, int64_t max);
  /// A finite number in [min, max], or (min, max] when `minExclusive`.
  std::optional<double> number(llvm::StringRef key, double min, double max,
                               bool minExclusive = false);
  std::optional<bool> boolean(llvm::StringRef key);
  /// A non-empty string.
  std::optional<std::string> string(llvm::StringRef key);
  /// One of `choices` (spelled as in the file); returns its index.
  std::optional<size_t> choice(llvm::StringRef key, llvm::ArrayRef<llvm::StringRef> choices);
  const llvm::json::Object *object(llvm::StringRef key);
  const llvm::json::Array *array(llvm::StringRef key);
  /// The raw value, for keys that accept several types.
  const llvm::json::Value *value(llvm::StringRef key);

  /// Reports a missing key unless it is present.
  bool require(llvm::StringRef key);
  /// Reports keys that were never read. Call once all keys were asked for.
  void rejectUnknownKeys();

  /// Path of `key` inside this object, e.g. "parallelism.pipeline".
  std::string keyPath(llvm::StringRef key) const;
  /// Path of element `index` of array `key`, e.g. "model.layers[3]".
  std::string elementPath(llvm::StringRef key, size_t index) const;
  Diagnostics &getDiagnostics() { return diag; }
  bool failed() const { return diag.failed(); }

private:
  const llvm::json::Value *lookup(llvm::StringRef key);
  void typeError(llvm::StringRef key, llvm::StringRef expected, const llvm::json::Value &got);

  const llvm::json::Object &obj;
  std::string path;
  Diagnostics &diag;
  llvm::StringSet<> seen;
};

/// The value as an int64 when it is a whole number that fits, else nullopt. Use it instead of
/// json::Value::getAsInteger, which converts the double 2^63 (written, say, as
/// `9223372036854775807.0`) to int64 and so overflows.
std::optional<int64_t> jsonInteger(const llvm::json::Value &value);

/// A short description of a JSON value for diagnostics: `"abc"`, `12`, `an object`, ...
std::string describeJson(const llvm::json::Value &value);

/// Reads an integer in [min, max] from an array element (or any value) at `keyPath`.
std::optional<int64_t> readInteger(const llvm::json::Value &value, const std::string &keyPath,
                                   int64_t min, int64_t max, Diagnostics &diag);

} // namespace conduit

#endif // CONDUIT_ANALYSIS_JSONREADER_H
