//===- KeyEditor.h - dotted keys of a job's JSON ----------------*- C++ -*-===//
//
// The one place a job's JSON is edited by key path ("parallelism.pipeline"): the overrides of
// `--set` ("a.b.c=value"), the combinations of `--sweep`, and the configurations the tuner
// applies. A value written on a command line is JSON where it parses as JSON, else a string.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_JOB_KEYEDITOR_H
#define CONDUIT_JOB_KEYEDITOR_H

#include "job/JsonReader.h"

#include <string>
#include <string_view>

namespace conduit {

/// The value at dotted `key` inside `root`, or null.
const Json *findKey(const Json &root, std::string_view key);

/// Sets dotted `key` inside `root` to `value`, creating the objects on its way. Fails where the
/// way is blocked (an empty part, or a value on the way that is not an object), and then sets
/// `blocked` to the dotted prefix that is not an object ("" for `root` itself).
bool setKey(Json &root, std::string_view key, Json value, std::string *blocked = nullptr);

/// Removes dotted `key` from `root` when it is there.
void eraseKey(Json &root, std::string_view key);

/// A value as written on a command line: JSON where it parses as JSON, else the text as a
/// string.
Json parseValueText(std::string_view text);

/// Applies one `--set` override "key.path=value" to `root`; reports a malformed override. A
/// file named on the command line (model.path, cluster.profile, training.data.path) is made
/// absolute, since it is relative to the current folder, not to the job file as the job's own
/// paths are.
bool applyOverride(Json &root, std::string_view assignment, Diagnostics &diag);

} // namespace conduit

#endif // CONDUIT_JOB_KEYEDITOR_H
