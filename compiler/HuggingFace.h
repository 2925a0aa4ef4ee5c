//===- HuggingFace.h - import of Hugging Face model configs -----*- C++ -*-===//
//
// Reads the config.json of a Hugging Face decoder model (GPT-2, Llama, Mistral, Qwen2) into a
// transformer shape. Keys the importer does not need are ignored: the file is Hugging Face's
// format, not Conduit's.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_COMPILER_HUGGINGFACE_H
#define CONDUIT_COMPILER_HUGGINGFACE_H

#include "compiler/JobFile.h"

namespace conduit {

/// The model types the importer understands.
llvm::ArrayRef<llvm::StringRef> huggingFaceModelTypes();

/// Reads `path`; problems are reported against that file.
std::optional<TransformerSpec> readHuggingFaceConfig(llvm::StringRef path, Diagnostics &diag);

/// The same for a config already parsed (`diag` names its file).
std::optional<TransformerSpec> parseHuggingFaceConfig(const llvm::json::Value &root,
                                                      Diagnostics &diag);

} // namespace conduit

#endif // CONDUIT_COMPILER_HUGGINGFACE_H
