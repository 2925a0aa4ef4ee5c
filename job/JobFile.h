//===- JobFile.h - reading a job file ---------------------------*- C++ -*-===//
//
// A job file is one JSON object with four sections (ARCHITECTURE.md §3); the reader produces
// its validated, defaults-filled form (job/JobSpec.h). Every problem is one diagnostic naming
// the file, the key path and what was expected; nothing is read past the first problem.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_JOB_JOBFILE_H
#define CONDUIT_JOB_JOBFILE_H

#include "job/JobSpec.h"
#include "job/JsonReader.h"

#include "absl/types/span.h"

#include <optional>
#include <string>
#include <string_view>

namespace conduit {

/// Reads and validates the job file at `path`, after applying `overrides` ("a.b.c=value",
/// value as JSON, or as a string when it is not valid JSON; job/KeyEditor.h) to its content.
std::optional<Job> readJobFile(std::string_view path, Diagnostics &diag,
                               absl::Span<const std::string> overrides = {});

/// Validates an already parsed job (for example one edited by --sweep). Relative paths inside
/// it resolve against the directory of `path`.
std::optional<Job> parseJob(const Json &root, std::string_view path, Diagnostics &diag);

/// The same without the `parallelism` section, which is neither read nor required (the
/// returned job has the default one): the model, cluster and training that a search over
/// parallel configurations starts from.
std::optional<Job> parseJobWithoutParallelism(const Json &root, std::string_view path,
                                              Diagnostics &diag);

/// Reads `parallelism`, a job file's parallelism section, for `job`, whose model, cluster and
/// training parseJobWithoutParallelism read, and checks it against them: what parseJob reports
/// for the whole job with that section, without reading the rest again (a search reads many
/// sections for one model). On success `job.parallelism` holds it; on failure it is unchanged.
bool parseParallelismFor(Job &job, const Json &parallelism, Diagnostics &diag);

} // namespace conduit

#endif // CONDUIT_JOB_JOBFILE_H
