//===- HfModelFile.cpp - a model's tensors in one file or in shards ------===//
//
// --init's reader: the safetensors file conduit-run writes, or the shards and index the
// transformers library writes for a larger model (save_pretrained's default cuts files at a few
// gigabytes: Mixtral-8x7B comes in 19, DeepSeek-V3 in 163). Every file is untrusted input: the
// index is bounded and parsed with a JSON library, its file names may not leave its folder,
// and the files must agree with it exactly before any tensor is read. DeepSeek-V3's released
// weights are FP8 matrices with block scales, converted as they are read, and hold its
// multi-token prediction module as a layer after the blocks, which a model without one leaves
// out, as Hugging Face's DeepseekV3ForCausalLM does.
//
//===----------------------------------------------------------------------===//

#include "runtime/weights/HfWeights.h"

#include "runtime/plan/Limits.h"
#include "runtime/weights/HfFamily.h"
#include "runtime/weights/UntrustedJson.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>

namespace fs = std::filesystem;

namespace conduit::runtime {

namespace {

constexpr char kIndexName[] = "model.safetensors.index.json";

/// Where each tensor lies, by the index at `path`: its weight_map, checked.
absl::StatusOr<std::map<std::string, std::string>> readIndex(const std::string &path) {
  std::error_code error;
  const uintmax_t size = fs::file_size(path, error);
  if (error)
    return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", error.message()));
  if (size > kMaxSafeTensorsHeaderBytes)
    return absl::InvalidArgumentError(absl::StrCat(
        path, " has ", size, " bytes; an index has at most ", kMaxSafeTensorsHeaderBytes));
  std::ifstream in(path, std::ios::binary);
  std::string text(size, '\0');
  if (!in.read(text.data(), static_cast<std::streamsize>(size)))
    return absl::UnavailableError(absl::StrCat("cannot read ", path));
  CONDUIT_ASSIGN_OR_RETURN(const nlohmann::json root,
                           parseUntrustedJson(text, path, "the index", 2));
  auto bad = [&](const std::string &why) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", why));
  };
  if (!root.is_object() || !root.contains("weight_map") || !root["weight_map"].is_object())
    return bad("has no \"weight_map\" object (a Hugging Face index maps each tensor to its file)");
  std::map<std::string, std::string> where;
  for (const auto &[tensor, file] : root["weight_map"].items()) {
    if (!file.is_string())
      return bad(absl::StrCat("the weight_map's \"", tensor, "\" is not a file name"));
    const std::string name = file.get<std::string>();
    if (name.empty() || name == "." || name == ".." ||
        name.find_first_of("/\\") != std::string::npos)
      return bad(absl::StrCat("the weight_map places \"", tensor, "\" in \"", name,
                              "\", which is not a file of the index's folder"));
    where.emplace(tensor, name);
  }
  return where;
}

/// The training steps behind the files' parameters: their "conduit.step", which those that
/// state it must agree on; 0 when none does.
absl::StatusOr<int64_t> stepOf(const std::vector<SafeTensorsReader> &files) {
  std::optional<int64_t> step;
  for (const SafeTensorsReader &file : files) {
    const auto &metadata = file.header().metadata;
    const auto found = metadata.find(kHfStepKey);
    if (found == metadata.end())
      continue;
    int64_t value = 0;
    if (!absl::SimpleAtoi(found->second, &value) || value < 0 || value > limits::kMaxSteps)
      return absl::InvalidArgumentError(
          absl::StrCat(file.path(), ": the metadata's ", kHfStepKey, " \"", found->second,
                       "\" is not a step between 0 and ", limits::kMaxSteps));
    if (step && *step != value)
      return absl::InvalidArgumentError(
          absl::StrCat(file.path(), ": the metadata's ", kHfStepKey, " is ", value,
                       " where another file of the model says ", *step));
    step = value;
  }
  return step.value_or(0);
}

/// The layer `name` belongs to (model.layers.N.: N written in decimal without a sign or a
/// leading zero), or -1.
int64_t layerOf(const std::string &name) {
  const std::string prefix = "model.layers.";
  if (name.compare(0, prefix.size(), prefix) != 0)
    return -1;
  const size_t end = name.find('.', prefix.size());
  const std::string digits =
      end == std::string::npos ? std::string() : name.substr(prefix.size(), end - prefix.size());
  int64_t layer = -1;
  if (digits.empty() || digits.size() > 9 || (digits.size() > 1 && digits[0] == '0') ||
      digits.find_first_not_of("0123456789") != std::string::npos ||
      !absl::SimpleAtoi(digits, &layer))
    return -1;
  return layer;
}

/// The layers of a DeepSeek checkpoint that are multi-token prediction modules a plan without
/// model.mtp_layers does not train: those after the model's blocks with the module's own
/// projection (eh_proj; DeepSeek-V3's layer 61). Any other layer past the blocks is an error
/// of the model, not skipped.
std::set<int64_t> unplannedMtpLayers(const Plan &plan, const HfModelFile &model) {
  std::set<int64_t> layers;
  const Transformer &t = *plan.transformer;
  if (!isDeepSeek(t) || t.mtpLayers > 0)
    return layers;
  for (const auto &[name, file] : model.fileOf) {
    const int64_t layer = layerOf(name);
    if (layer >= t.numLayers && name == absl::StrCat("model.layers.", layer, ".eh_proj.weight"))
      layers.insert(layer);
  }
  return layers;
}

/// Multiplies FP8 `values` of the matrix `weight` by its block scales (kFp8ScaleSuffix), which
/// checkHfTensors found beside it.
absl::Status scaleFp8(HfModelFile &model, const TensorEntry &weight, std::vector<float> &values) {
  const std::string name = weight.name + kFp8ScaleSuffix;
  const auto placed = model.fileOf.find(name);
  SafeTensorsReader *file = placed == model.fileOf.end() ? nullptr : &model.files[placed->second];
  const TensorEntry *entry = file ? file->header().find(name) : nullptr;
  if (!entry)
    return absl::InternalError(absl::StrCat("tensor \"", name, "\" was not checked"));
  std::vector<float> scales(entry->elements());
  CONDUIT_RETURN_IF_ERROR(file->readFloats(*entry, scales.data()));
  const int64_t rows = weight.shape[0], cols = weight.shape[1], across = entry->shape[1];
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      values[r * cols + c] *= scales[(r / kFp8Block) * across + c / kFp8Block];
  return absl::OkStatus();
}

/// Opens the shards the index at `path` names and checks that each holds exactly the tensors
/// the index places in it.
absl::Status openShards(const std::string &path, HfModelFile &model) {
  CONDUIT_ASSIGN_OR_RETURN(auto where, readIndex(path));
  const fs::path folder = fs::path(path).parent_path();
  std::map<std::string, size_t> opened;
  for (const auto &[tensor, name] : where) {
    auto [at, added] = opened.emplace(name, model.files.size());
    if (added) {
      CONDUIT_ASSIGN_OR_RETURN(SafeTensorsReader file,
                               SafeTensorsReader::open((folder / name).string()));
      model.files.push_back(std::move(file));
    }
    model.fileOf.emplace(tensor, at->second);
  }
  for (size_t f = 0; f < model.files.size(); ++f)
    for (const TensorEntry &t : model.files[f].header().tensors) {
      const auto placed = model.fileOf.find(t.name);
      if (placed == model.fileOf.end() || placed->second != f)
        return absl::InvalidArgumentError(
            absl::StrCat(model.files[f].path(), ": holds tensor \"", t.name, "\", which ", path,
                         placed == model.fileOf.end()
                             ? std::string(" does not name")
                             : absl::StrCat(" places in ", model.files[placed->second].path())));
    }
  for (const auto &[tensor, f] : model.fileOf)
    if (!model.files[f].header().find(tensor))
      return absl::InvalidArgumentError(absl::StrCat(path, " places tensor \"", tensor, "\" in ",
                                                     model.files[f].path(),
                                                     ", which does not hold it"));
  return absl::OkStatus();
}

} // namespace

absl::StatusOr<HfModelFile> openHfModel(const Plan &plan, const std::string &path) {
  HfModelFile model;
  CONDUIT_ASSIGN_OR_RETURN(model.tensors, hfTensors(plan));
  std::string file = path;
  std::error_code error;
  if (fs::is_directory(path, error)) {
    const fs::path index = fs::path(path) / kIndexName, single = fs::path(path) / kHfModelFileName;
    if (fs::exists(index, error))
      file = index.string();
    else if (fs::exists(single, error))
      file = single.string();
    else
      return absl::NotFoundError(
          absl::StrCat(path, " holds neither ", kIndexName, " nor ", kHfModelFileName));
  }
  const bool sharded = fs::path(file).extension() == ".json";
  if (sharded) {
    CONDUIT_RETURN_IF_ERROR(openShards(file, model));
  } else {
    CONDUIT_ASSIGN_OR_RETURN(SafeTensorsReader reader, SafeTensorsReader::open(file));
    for (const TensorEntry &t : reader.header().tensors)
      model.fileOf.emplace(t.name, 0);
    model.files.push_back(std::move(reader));
  }
  // Exactly the model's tensors, over every file (but a multi-token prediction module the
  // plan leaves out).
  const std::set<int64_t> skipped = unplannedMtpLayers(plan, model);
  SafeTensorsHeader all;
  for (const SafeTensorsReader &f : model.files)
    for (const TensorEntry &t : f.header().tensors)
      if (!skipped.count(layerOf(t.name)))
        all.tensors.push_back(t);
  all.indexNames();
  CONDUIT_RETURN_IF_ERROR(checkHfTensors(all, model.tensors, file));
  CONDUIT_ASSIGN_OR_RETURN(model.step, stepOf(model.files));
  return model;
}

absl::StatusOr<std::vector<float>> readHfLayers(HfModelFile &model, const Plan &plan, int64_t first,
                                                int64_t end) {
  std::vector<int64_t> offsets{0};
  for (int64_t l = first; l < end; ++l)
    offsets.push_back(offsets.back() + plan.layers[l].params);
  std::vector<float> params(offsets.back()), values;
  for (const HfTensor &t : model.tensors) {
    if (t.layer < first || t.layer >= end)
      continue;
    const auto placed = model.fileOf.find(t.name);
    SafeTensorsReader *file = placed == model.fileOf.end() ? nullptr : &model.files[placed->second];
    const TensorEntry *entry = file ? file->header().find(t.name) : nullptr;
    if (!entry || entry->elements() != t.elements())
      return absl::InternalError(absl::StrCat("tensor \"", t.name, "\" was not checked"));
    values.resize(t.elements());
    CONDUIT_RETURN_IF_ERROR(file->readFloats(*entry, values.data()));
    if (entry->dtype == "F8_E4M3")
      CONDUIT_RETURN_IF_ERROR(scaleFp8(model, *entry, values));
    if (t.zero && std::any_of(values.begin(), values.end(), [](float v) { return v != 0; }))
      return absl::InvalidArgumentError(absl::StrCat(
          file->path(), ": tensor \"", t.name,
          "\" is not zero; the plan's shared experts have no gate, so it reads only the zero "
          "gate (a factor of 1/2) it writes; compile the job with model.moe.shared_expert_gate "
          "true (as the Hugging Face config's import does) to read this gate"));
    importHfTensor(t, values.data(), params.data() + offsets[t.layer - first]);
  }
  return params;
}

} // namespace conduit::runtime
