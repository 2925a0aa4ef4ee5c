//===- JobFileFuzzer.cpp - libFuzzer target: job files and their inputs ---===//
//
// Job files, the Hugging Face configs they name and `--set` overrides come from users. The
// input's first byte picks what the rest is: a job file (validated whole), a Hugging Face
// config, or a job file followed by override lines (`key.path=value`, one per line, after a
// line holding only `--set`). Every input ends in a job, a config or one diagnostic; nothing
// else may happen.
//
//===----------------------------------------------------------------------===//

#include "job/HuggingFace.h"
#include "job/JobFile.h"
#include "job/KeyEditor.h"

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

using namespace conduit;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  const uint8_t kind = data[0] % 3;
  std::string_view text(reinterpret_cast<const char *>(data + 1), size - 1);
  // A path inside the corpus folder, so that relative model.path and cluster.profile values
  // resolve somewhere harmless.
  const char *path = "fuzz/job.json";
  if (kind == 1) {
    Diagnostics diag("fuzz/config.json");
    if (std::optional<Json> root = parseJsonText(text, diag))
      (void)parseHuggingFaceConfig(*root, diag);
    return 0;
  }
  std::string_view json = text, overrides;
  if (kind == 2)
    if (size_t split = text.find("\n--set\n"); split != std::string_view::npos) {
      json = text.substr(0, split);
      overrides = text.substr(split + 7);
    }
  Diagnostics diag(path);
  std::optional<Json> root = parseJsonText(json, diag);
  if (!root)
    return 0;
  // At most 16 line breaks are followed (the last piece holds the rest); empty lines are
  // skipped.
  std::vector<std::string_view> lines;
  for (int breaks = 0; breaks < 16; ++breaks) {
    const size_t end = overrides.find('\n');
    if (end == std::string_view::npos)
      break;
    if (end > 0)
      lines.push_back(overrides.substr(0, end));
    overrides.remove_prefix(end + 1);
  }
  if (!overrides.empty())
    lines.push_back(overrides);
  for (std::string_view line : lines)
    if (!applyOverride(*root, line, diag))
      return 0;
  (void)parseJob(*root, path, diag);
  return 0;
}
