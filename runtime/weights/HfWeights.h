//===- HfWeights.h - the model's parameters as Hugging Face tensors -*- C++ -*-===//
//
// Which Hugging Face tensor each of Conduit's parameters is, and in which layout: the names
// and shapes of Llama (LlamaForCausalLM; Qwen2ForCausalLM with biases on q, k and v only;
// Qwen3ForCausalLM with q/k norms) for models with RMSNorm, SwiGLU, rotary positions, heads of
// their own width or q/k norms, of DeepSeek-V3 (DeepseekV3ForCausalLM) for models with latent
// attention, and of GPT-2 (GPT2LMHeadModel) otherwise, with the config.json that goes with
// them; mixtures of experts take Mixtral's names, the Qwen MoE ones or DeepSeek-V3's. One
// table per architecture maps Conduit's per-layer parameter layout (below) to names; the
// functions here turn it into tensors, copy values between the two layouts, check a file's
// tensors against a plan, and write or read a model as safetensors (SafeTensors.h).
//
// Conduit's layout per layer, with hd the head width (h / heads unless the model sets it),
// q = heads * hd, kvd = kv_heads * hd and f = ffn; every matrix row-major [in × out]:
//   embedding: wte [V × h]; wpe [seq × h] (learned positions only)
//   block:     norm1 gamma [h], beta [h] (LayerNorm); Wqkv [h × (q + 2 kvd)] (columns q, k, v);
//              bqkv [q + 2 kvd] (bias all or qkv); Wo [q × h]; bo [h] (bias all); the q norm's
//              gamma [hd] and the k norm's [hd] (q/k norms); norm2 gamma, beta; W1 [h × f], or
//              [h × 2f] for SwiGLU (columns gate, then up); b1 [f or 2f] (bias all); W2
//              [f × h]; b2 [h] (bias all). With latent attention, in place of Wqkv to the k
//              norm (layers/LatentAttention.h): Wdq [h × rq], its gain [rq], Wuq [rq × H(dn +
//              dr)] (or Wq [h × H(dn + dr)]), Wdkv [h × (rkv + dr)], its gain [rkv], Wukv [rkv ×
//              H(dn + dv)], Wo [H·dv × h], bo [h] (bias all; Conduit's only)
//   head:      norm gamma [h], beta [h] (LayerNorm); the LM matrix: [h × V] untied, [V × h]
//              tied (the token table's layout, and its values)
// PyTorch's Linear weights are [out × in]: Llama's projections are the transposes of these
// matrices. DeepSeek-V3's config says the plan's rope_interleave: false makes Hugging Face's
// model rotate halves as Conduit does, so the weights are Conduit's as they are; true (the
// layout of DeepSeek's releases, which a config read from them plans) pairs dimensions 2i and
// 2i + 1, and the rotary columns of q_b_proj (or q_proj) and kv_a_proj_with_mqa are permuted
// between the two (HfTensor::conduitColumn). Its router scores by sigmoid with scaling factor
// 1, so a softmax-routed model's file loads in Conduit only. GPT-2's Conv1D weights are
// [in × out], Conduit's layout as it is.
//
//===----------------------------------------------------------------------===//

#ifndef CONDUIT_RUNTIME_WEIGHTS_HFWEIGHTS_H
#define CONDUIT_RUNTIME_WEIGHTS_HFWEIGHTS_H

#include "runtime/plan/Plan.h"
#include "runtime/weights/SafeTensors.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

namespace conduit::runtime {

/// One Hugging Face tensor and where its values live: columns [colBegin, colEnd) of the
/// row-major `rows` × `cols` matrix (a vector: one row) at `offset` of layer `layer`'s
/// parameters, as they are or transposed.
struct HfTensor {
  std::string name;
  std::vector<int64_t> shape; ///< Hugging Face's
  int64_t layer = 0;          ///< global layer index
  int64_t offset = 0, rows = 1, cols = 0, colBegin = 0, colEnd = 0;
  bool transpose = false;
  /// The tied LM head's matrix: the values of the token table `name`, which the embedding
  /// writes. Not written again; read from that tensor.
  bool tied = false;
  /// Hugging Face's values are `scale` times Conduit's (a Qwen2-MoE shared expert's down
  /// projection, twice Conduit's W2 against its zero gate).
  float scale = 1;
  /// A tensor Conduit has no parameter for (a Qwen2-MoE shared_expert_gate): written as zeros,
  /// and read only when it is zero.
  bool zero = false;
  /// Rotary columns in interleaved pairs (latent attention with rope_interleave): in every
  /// `ropePeriod` columns from colBegin, the `ropeWidth` from `ropeAt` are Conduit's halves
  /// (i and i + ropeWidth/2 rotate together) and Hugging Face's pairs (2i and 2i + 1).
  /// ropeWidth 0: the columns as they are.
  int64_t ropePeriod = 0, ropeAt = 0, ropeWidth = 0;

  int64_t elements() const { return rows * (colEnd - colBegin); }
  /// The column of Conduit's matrix that Hugging Face's column `c` (from 0) holds.
  int64_t conduitColumn(int64_t c) const;
};

/// "llama", "qwen3", "gpt2", "mixtral", "qwen2_moe", "qwen3_moe" or "deepseek_v3": the architecture
/// whose names `plan`'s model takes (a Qwen2 model takes Llama's).
const char *hfArchitecture(const Plan &plan);

/// Every Hugging Face tensor of `plan`'s model, in layer order (the tied head's copy
/// included). An error when the plan is not a transformer, or when a layer's parameter count
/// is not the layout's.
absl::StatusOr<std::vector<HfTensor>> hfTensors(const Plan &plan);

/// The config.json of `plan`'s model.
std::string hfConfigJson(const Plan &plan);
/// Its model_type: hfArchitecture's, or "qwen2" for a dense model with Qwen2's attention.
std::string hfModelType(const Plan &plan);

/// What the config.json of `plan`'s model cannot say, each as "what (the job key)": parts its
/// family's config has no key for, which Hugging Face's model (and a job reading that
/// config.json) would build otherwise. The tensors are written under the family's names all
/// the same, and --init with the plan's own job reads them back. Empty when the config says
/// the whole model. (A shared expert without a gate is said: Qwen2-MoE's gate is written as
/// zeros, its down projection doubled, the same function, though a job on the config trains
/// the gate.)
std::vector<std::string> hfConfigOmissions(const Plan &plan);

/// Copies tensor `t`'s values from its layer's parameters `layerParams` to `out` (t.elements()
/// floats) in Hugging Face's layout.
void exportHfTensor(const HfTensor &t, const float *layerParams, float *out);
/// The inverse: Hugging Face-layout `values` into the layer's parameters.
void importHfTensor(const HfTensor &t, const float *values, float *layerParams);

/// DeepSeek-V3's released weights: most matrices in FP8 (F8_E4M3), each with its scales as a
/// tensor of its own, NAME + kFp8ScaleSuffix, one per block of kFp8Block × kFp8Block (the
/// checkpoint's quantization_config, weight_block_size [128, 128]); a weight is its FP8 values
/// times its block's scale.
constexpr int64_t kFp8Block = 128;
constexpr char kFp8ScaleSuffix[] = "_scale_inv";

/// Checks that the file `path` with `header` holds exactly the tensors `expected` (the tied
/// copy is the token table's) with their shapes, each F32, BF16 or F16, or F8_E4M3 beside its
/// block scales.
absl::Status checkHfTensors(const SafeTensorsHeader &header, const std::vector<HfTensor> &expected,
                            const std::string &path);

/// The metadata key of the training steps behind a file's parameters.
constexpr char kHfStepKey[] = "conduit.step";
/// The file a model in one file is, in its folder (--save-params writes it, --init reads it).
constexpr char kHfModelFileName[] = "model.safetensors";

/// The safetensors files that hold exactly the tensors of a plan's model: one file, or the
/// shards a Hugging Face index (model.safetensors.index.json: {"weight_map": {TENSOR: FILE}})
/// names, as the library saves a model of more than a few gigabytes.
struct HfModelFile {
  std::vector<HfTensor> tensors; ///< hfTensors(plan)
  std::vector<SafeTensorsReader> files;
  /// Each tensor's file, an index into `files`, by name.
  std::map<std::string, size_t, std::less<>> fileOf;
  /// The training steps behind these parameters: the metadata "conduit.step" of a file
  /// conduit-run wrote, else 0.
  int64_t step = 0;
};
/// Opens the model at `path` and checks its tensors against `plan`'s model (checkHfTensors),
/// and its step. `path` is a safetensors file, an index, or a folder holding
/// model.safetensors.index.json or model.safetensors. An index's files are plain names in its
/// folder, and each holds exactly the tensors the index places in it.
absl::StatusOr<HfModelFile> openHfModel(const Plan &plan, const std::string &path);

/// The parameters of layers [first, end) of `plan`, one layer after the other, read from
/// `model`.
absl::StatusOr<std::vector<float>> readHfLayers(HfModelFile &model, const Plan &plan, int64_t first,
                                                int64_t end);

// Writing a model: the first writer creates DIR with config.json and an unfinished
// model.safetensors of the right size; then the writers of the layers fill in their tensors,
// each its own (several processes may share the work); then the first renames the file into
// place.

/// Writes `dir`/config.json and creates the unfinished `dir`/model.safetensors, whose
/// metadata says that `step` training steps led to it.
absl::Status beginHfModel(const Plan &plan, const std::string &dir, int64_t step);
/// Writes the tensors of layers [first, end), whose parameters `params` holds one layer after
/// the other, where the unfinished file's header says.
absl::Status writeHfLayers(const Plan &plan, const std::string &dir, int64_t first, int64_t end,
                           const float *params);
/// Moves the finished file into place as `dir`/model.safetensors.
absl::Status finishHfModel(const std::string &dir);
/// The three in one process: `params` holds every layer's parameters.
absl::Status writeHfModel(const Plan &plan, const std::string &dir, const float *params,
                          int64_t step);

} // namespace conduit::runtime

#endif // CONDUIT_RUNTIME_WEIGHTS_HFWEIGHTS_H
