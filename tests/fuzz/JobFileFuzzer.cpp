//===- JobFileFuzzer.cpp - libFuzzer target: job files and their inputs ---===//
//
// Job files, the Hugging Face configs they name and `--set` overrides come from users. The
// input's first byte picks what the rest is: a job file (validated whole), a Hugging Face
// config, or a job file followed by override lines (`key.path=value`, one per line, after a
// line holding only `--set`). Every input ends in a job, a config or one diagnostic; nothing
// else may happen.
//
//===----------------------------------------------------------------------===//

#include "compiler/HuggingFace.h"
#include "compiler/JobFile.h"

#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <cstddef>
#include <cstdint>

using namespace conduit;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size == 0)
    return 0;
  const uint8_t kind = data[0] % 3;
  llvm::StringRef text(reinterpret_cast<const char *>(data + 1), size - 1);
  // A path inside the corpus folder, so that relative model.path and cluster.profile values
  // resolve somewhere harmless.
  const char *path = "fuzz/job.json";
  if (kind == 1) {
    Diagnostics diag("fuzz/config.json");
    if (std::optional<llvm::json::Value> root = parseJsonText(text, diag))
      (void)parseHuggingFaceConfig(*root, diag);
    return 0;
  }
  llvm::StringRef json = text, overrides;
  if (kind == 2)
    std::tie(json, overrides) = text.split("\n--set\n");
  Diagnostics diag(path);
  std::optional<llvm::json::Value> root = parseJsonText(json, diag);
  if (!root)
    return 0;
  llvm::SmallVector<llvm::StringRef> lines;
  overrides.split(lines, '\n', /*MaxSplit=*/16, /*KeepEmpty=*/false);
  for (llvm::StringRef line : lines)
    if (!applyOverride(*root, line, diag))
      return 0;
  (void)parseJob(*root, path, diag);
  return 0;
}
