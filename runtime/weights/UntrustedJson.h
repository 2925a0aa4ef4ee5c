//===- UntrustedJson.h - JSON read from files a run is given -----*- C++ -*-===//
//
// For the readers of runtime/weights/ only: a safetensors header and a Hugging Face index
// are untrusted input, parsed with one set of limits.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_WEIGHTS_UNTRUSTEDJSON_H
#define CONDUIT_RUNTIME_WEIGHTS_UNTRUSTEDJSON_H

#include "runtime/Status.h"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace conduit::runtime {

/// The deepest nesting of arrays and objects untrusted JSON may have.
constexpr int kMaxJsonNesting = 64;

/// Parses `text`, which `what` names in messages ("the header"), after checking that it nests
/// arrays and objects at most kMaxJsonNesting deep (`depth` says how deep the format nests);
/// invalid JSON or UTF-8 and an object naming a key twice are refused. Messages start with
/// `path`.
absl::StatusOr<nlohmann::json> parseUntrustedJson(std::string_view text, const std::string &path,
                                                  std::string_view what, int depth);

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_WEIGHTS_UNTRUSTEDJSON_H
