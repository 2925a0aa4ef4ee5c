//===- HuggingFace.h - import of Hugging Face model configs -----*- C++ -*-===//
//
// Reads the config.json of a Hugging Face decoder model (GPT-2, Llama, Mistral, Qwen2, and the
// mixtures of experts Mixtral, Qwen2-MoE, Qwen3-MoE and DeepSeek-V3) into a transformer shape. Keys
// the importer does not need are ignored: the file is Hugging Face's format, not Conduit's. The
// job-file reader calls this reader, never the other way round.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_JOB_HUGGINGFACE_H
#define CONDUIT_JOB_HUGGINGFACE_H

#include "job/JobSpec.h"
#include "job/JsonReader.h"

#include "absl/types/span.h"

#include <optional>
#include <string_view>

namespace conduit {

/// The model types the importer understands.
absl::Span<const std::string_view> huggingFaceModelTypes();

/// Reads `path`; problems are reported against that file.
std::optional<TransformerSpec> readHuggingFaceConfig(std::string_view path, Diagnostics &diag);

/// The same for a config already parsed (`diag` names its file).
std::optional<TransformerSpec> parseHuggingFaceConfig(const Json &root, Diagnostics &diag);

/// Reads a rotary context extension under Hugging Face's `rope_scaling` keys (a config's, or
/// the job's model.rope_scaling): `rope_type` (older configs: `type`) `default`, `linear`,
/// `llama3` or `yarn`, and what that type reads. yarn's original context defaults to
/// `positions` (the model's maximum positions, as the transformers library takes it) and its
/// magnitude on cos and sin to the library's rule from `mscale` and `mscale_all_dim`. Returns
/// nothing after a problem, reported naming the key.
std::optional<runtime::RopeScaling> readRopeScaling(ObjectReader &section, int64_t positions);

} // namespace conduit

#endif // CONDUIT_JOB_HUGGINGFACE_H
