//===- JsonWriter.h - JSON strings and numbers for the runtime's outputs -*- C++ -*-===//
//
// The runtime writes JSON in three places: the plan dump (PlanJson.cpp), the measured trace
// (Trace.cpp) and the profile (runtime/session/Profile.cpp). Each lays out its own document; the
// literals come from here, so that every string is escaped the way RFC 8259 requires
// (quotation mark, reverse solidus and all control characters U+0000 to U+001F) and every
// number is one JSON can hold.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_PLAN_JSONWRITER_H
#define CONDUIT_RUNTIME_PLAN_JSONWRITER_H

#include <ostream>
#include <string>
#include <string_view>

namespace conduit::runtime {

/// Appends `text` to `out` as a JSON string literal, quotes included: `"` and `\` escaped,
/// \b \f \n \r \t by name, the other control characters as \u00XX; every other byte (UTF-8
/// included) as it is.
void appendJsonString(std::string &out, std::string_view text);

/// `text` as a JSON string literal.
std::string jsonString(std::string_view text);

/// `value` with up to `digits` significant digits ("%.*g"); JSON has no NaN or infinity, so
/// those are written as null.
std::string jsonNumber(double value, int digits = 9);

/// Writes `text` to `os` as a JSON string literal.
inline std::ostream &writeJsonString(std::ostream &os, std::string_view text) {
  return os << jsonString(text);
}

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_PLAN_JSONWRITER_H
