//===- HfWeights.cpp - the model's parameters as Hugging Face tensors ------===//

#include "runtime/weights/HfWeights.h"
#include "runtime/weights/HfFamily.h"

#include "absl/strings/str_cat.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <tuple>

namespace fs = std::filesystem;

namespace conduit::runtime {

namespace {

/// Conduit's parameter arrays (HfWeights.h lists them per layer).
enum class Param {
  Wte,
  Wpe,
  Norm1G,
  Norm1B,
  Wqkv,
  Bqkv,
  /// Latent attention (DeepSeek-V3), in place of Wqkv and Bqkv: the query latent's down
  /// projection, its norm's gain and its up projection, or the queries' projection without a
  /// latent; the key/value latent's down projection (with the shared rotary key), its norm's
  /// gain and its up projection.
  Wdq,
  QaNorm,
  Wuq,
  Wq,
  Wdkv,
  KvaNorm,
  Wukv,
  Wo,
  Bo,
  QNorm, ///< the q/k norms' gains (Qwen3)
  KNorm,
  Norm2G,
  Norm2B,
  W1,
  B1,
  W2,
  B2,
  NormG,
  NormB,
  Lm,
  /// A multi-token prediction module's own arrays before its block's (runtime/model/layers/
  /// Mtp.h): its norms of the embedding, of the previous hidden state and of its head's input
  /// (gains, and biases with LayerNorm), and its projection M [2h × h].
  ENormG,
  ENormB,
  HNormG,
  HNormB,
  EhProj,
  MtpNormG,
  MtpNormB,
  Moe, ///< a block's mixture of experts, in place of W1 to B2: its own tensors (moeTensors)
  None ///< no array (a module without a bias)
};
/// Which columns of an array a tensor takes: all, the q, k or v columns of the attention's
/// projection (or bias), the gate or up columns of a SwiGLU W1 (or b1). `Up` is all of W1 in
/// a GELU MLP; `Gate` is nothing there.
enum class Columns { All, Q, K, V, Gate, Up };

/// A module of a layer as Hugging Face names it: `<name>.weight` holds the columns `columns`
/// of `weight`, `<name>.bias` the same columns of `bias` (Param::None: it has none). Llama
/// (and Qwen2) and GPT-2 have the same modules in the same places, except that GPT-2 keeps
/// q, k and v in one module and has no SwiGLU gate: its name stands on the first of the
/// rows it covers, for all their columns, and the others have none (nullptr).
///
/// A Llama-named model with LayerNorm keeps its betas as the norms' biases; one with learned
/// positions its position table as model.embed_positions.weight, and one with a GELU MLP its
/// W1 as up_proj: Hugging Face's Llama has neither, so such files load in Conduit only.
struct Module {
  Param weight, bias;
  Columns columns; ///< in Llama; GPT-2's modules take all columns
  const char *llama, *gpt2;
};
constexpr Module kEmbedding[] = {
    {Param::Wte, Param::None, Columns::All, "model.embed_tokens", "transformer.wte"},
    {Param::Wpe, Param::None, Columns::All, "model.embed_positions", "transformer.wpe"}};
constexpr Module kBlock[] = {
    {Param::Norm1G, Param::Norm1B, Columns::All, "input_layernorm", "ln_1"},
    {Param::Wqkv, Param::Bqkv, Columns::Q, "self_attn.q_proj", "attn.c_attn"},
    {Param::Wqkv, Param::Bqkv, Columns::K, "self_attn.k_proj", nullptr},
    {Param::Wqkv, Param::Bqkv, Columns::V, "self_attn.v_proj", nullptr},
    {Param::Wdq, Param::None, Columns::All, "self_attn.q_a_proj", nullptr},
    {Param::QaNorm, Param::None, Columns::All, "self_attn.q_a_layernorm", nullptr},
    {Param::Wuq, Param::None, Columns::All, "self_attn.q_b_proj", nullptr},
    {Param::Wq, Param::None, Columns::All, "self_attn.q_proj", nullptr},
    {Param::Wdkv, Param::None, Columns::All, "self_attn.kv_a_proj_with_mqa", nullptr},
    {Param::KvaNorm, Param::None, Columns::All, "self_attn.kv_a_layernorm", nullptr},
    {Param::Wukv, Param::None, Columns::All, "self_attn.kv_b_proj", nullptr},
    {Param::Wo, Param::Bo, Columns::All, "self_attn.o_proj", "attn.c_proj"},
    {Param::QNorm, Param::None, Columns::All, "self_attn.q_norm", nullptr},
    {Param::KNorm, Param::None, Columns::All, "self_attn.k_norm", nullptr},
    {Param::Norm2G, Param::Norm2B, Columns::All, "post_attention_layernorm", "ln_2"},
    {Param::W1, Param::B1, Columns::Gate, "mlp.gate_proj", nullptr},
    {Param::W1, Param::B1, Columns::Up, "mlp.up_proj", "mlp.c_fc"},
    {Param::W2, Param::B2, Columns::All, "mlp.down_proj", "mlp.c_proj"}};
/// A multi-token prediction module's own tensors, DeepSeek-V3's names under its layer's prefix
/// (model.layers.N with N = num_layers + k); its block's follow as kBlock's. Its copy of the
/// token table (the first module's, untied) is embed_tokens, and the head's matrix it shares is
/// written again as shared_head.head, as DeepSeek's checkpoints hold both.
constexpr Module kMtp[] = {
    {Param::Wte, Param::None, Columns::All, "embed_tokens", nullptr},
    {Param::ENormG, Param::ENormB, Columns::All, "enorm", nullptr},
    {Param::HNormG, Param::HNormB, Columns::All, "hnorm", nullptr},
    {Param::EhProj, Param::None, Columns::All, "eh_proj", nullptr},
    {Param::MtpNormG, Param::MtpNormB, Columns::All, "shared_head.norm", nullptr}};
constexpr Module kHead[] = {
    {Param::NormG, Param::NormB, Columns::All, "model.norm", "transformer.ln_f"},
    {Param::Lm, Param::None, Columns::All, "lm_head", "lm_head"}};

/// The parameters of a block's mixture of experts (runtime/model/layers/Moe.h): the router,
/// the shared experts and their gate, the routed experts.
int64_t moeParams(const Transformer &t) {
  const int64_t h = t.hiddenSize, gate = t.mlp == 1 ? 2 : 1, biases = t.bias == 0;
  const int64_t shared = t.sharedExperts > 0 ? t.sharedFfnHiddenSize : 0;
  auto mlp = [&](int64_t f) { return f > 0 ? (gate + 1) * h * f + biases * (gate * f + h) : 0; };
  return h * t.numExperts + (t.router == 1 ? t.numExperts : 0) + mlp(shared) +
         (t.sharedExpertGate ? h : 0) + t.numExperts * mlp(t.expertFfnHiddenSize);
}

/// The Hugging Face tensors of block `block`'s mixture of experts (global layer `layer`, its
/// parameters from `at` in the layer), appended to `out`. Mixtral: block_sparse_moe.gate and
/// block_sparse_moe.experts.M.w1 (gate), w3 (up), w2 (down). Qwen2-MoE: mlp.gate,
/// mlp.experts.M.gate_proj, up_proj, down_proj, and mlp.shared_expert.* with
/// mlp.shared_expert_gate: the gate's vector where the model has one, else that tensor is zero (a
/// factor sigmoid(0) = 1/2) and shared_expert.down_proj holds twice Conduit's W2, which
/// computes exactly Conduit's sum. DeepSeek-V3: the Qwen names for the router and the routed
/// experts, and mlp.shared_experts.* as they are (no gate).
void moeTensors(const Transformer &t, const std::string &prefix, int64_t layer, int64_t at,
                std::vector<HfTensor> &out) {
  const bool deepSeek = isDeepSeek(t), qwen = isQwenMoe(t), swiglu = t.mlp == 1,
             biases = t.bias == 0;
  const int64_t h = t.hiddenSize;
  // Columns [begin, end) of the rows × cols matrix at `at` (a vector: rows 1, not transposed).
  auto add = [&](const std::string &name, int64_t rows, int64_t cols, int64_t begin, int64_t end,
                 float scale = 1, bool vector = false) {
    HfTensor x;
    x.name = prefix + name;
    x.layer = layer;
    x.offset = at;
    x.rows = rows;
    x.cols = cols;
    x.colBegin = begin;
    x.colEnd = end;
    x.transpose = !vector; // nn.Linear: [out × in]
    x.scale = scale;
    x.shape = vector ? std::vector<int64_t>{end - begin} : std::vector<int64_t>{end - begin, rows};
    out.push_back(std::move(x));
  };
  const std::string router = qwen ? "mlp.gate." : "block_sparse_moe.gate.";
  add(router + "weight", h, t.numExperts, 0, t.numExperts);
  at += h * t.numExperts;
  if (t.router == 1) {
    // DeepSeek-V3's name for the sigmoid router's bias.
    add(router + "e_score_correction_bias", 1, t.numExperts, 0, t.numExperts, 1, true);
    at += t.numExperts;
  }
  // An MLP of width f in Conduit's order W1, b1, W2, b2 (the biases with bias "all").
  auto mlp = [&](const std::string &base, int64_t f, const char *gate, const char *up,
                 const char *down, float downScale) {
    const int64_t width = swiglu ? 2 * f : f;
    if (swiglu)
      add(base + gate + ".weight", h, width, 0, f);
    add(base + up + ".weight", h, width, swiglu ? f : 0, width);
    at += h * width;
    if (biases) {
      if (swiglu)
        add(base + gate + ".bias", 1, width, 0, f, 1, true);
      add(base + up + ".bias", 1, width, swiglu ? f : 0, width, 1, true);
      at += width;
    }
    add(base + down + ".weight", f, h, 0, h, downScale);
    at += f * h;
    if (biases) {
      add(base + down + ".bias", 1, h, 0, h, downScale, true);
      at += h;
    }
  };
  if (t.sharedExperts > 0 && deepSeek) {
    mlp("mlp.shared_experts.", t.sharedFfnHiddenSize, "gate_proj", "up_proj", "down_proj", 1);
  } else if (t.sharedExperts > 0 && t.sharedExpertGate) {
    mlp("mlp.shared_expert.", t.sharedFfnHiddenSize, "gate_proj", "up_proj", "down_proj", 1);
    add("mlp.shared_expert_gate.weight", h, 1, 0, 1); // nn.Linear(h, 1): [1 × h]
    at += h;
  } else if (t.sharedExperts > 0) {
    mlp("mlp.shared_expert.", t.sharedFfnHiddenSize, "gate_proj", "up_proj", "down_proj", 2);
    HfTensor gate;
    gate.name = prefix + "mlp.shared_expert_gate.weight";
    gate.layer = layer;
    gate.rows = 1;
    gate.cols = gate.colEnd = h;
    gate.zero = true;
    gate.shape = {1, h};
    out.push_back(std::move(gate));
  }
  for (int64_t e = 0; e < t.numExperts; ++e) {
    if (qwen)
      mlp(absl::StrCat("mlp.experts.", e, "."), t.expertFfnHiddenSize, "gate_proj", "up_proj",
          "down_proj", 1);
    else
      mlp(absl::StrCat("block_sparse_moe.experts.", e, "."), t.expertFfnHiddenSize, "w1", "w3",
          "w2", 1);
  }
}

/// Where one of Conduit's arrays lies in its layer.
struct Span {
  int64_t offset = -1, rows = 1, cols = 0;
  bool vector = false;
};

/// Conduit's layout of a layer of kind `kind`: each array's span (offset -1: absent), and
/// the layer's parameter count. A block at `mtpDepth` 0 or more is that multi-token prediction
/// module: its own arrays, then its block's.
std::map<Param, Span> layoutOf(LayerKind kind, const Transformer &t, bool experts, int64_t &total,
                               int64_t mtpDepth = -1) {
  const int64_t h = t.hiddenSize, hd = headWidth(t), q = t.numHeads * hd, kvd = t.numKvHeads * hd,
                f = t.ffnHiddenSize, v = t.vocabSize;
  const bool layerNorm = t.norm == 0, swiglu = t.mlp == 1;
  const bool qkvBias = t.bias != 2, otherBias = t.bias == 0;
  std::map<Param, Span> spans;
  total = 0;
  auto take = [&](Param p, int64_t rows, int64_t cols, bool vector, bool present = true) {
    if (!present)
      return;
    spans[p] = {total, rows, cols, vector};
    total += rows * cols;
  };
  switch (kind) {
  case LayerKind::Embedding:
    take(Param::Wte, v, h, false);
    take(Param::Wpe, t.seqLength, h, false, t.position == 0);
    break;
  case LayerKind::Block:
    if (mtpDepth >= 0) {
      take(Param::Wte, v, h, false, mtpDepth == 0 && !t.tieEmbeddings);
      take(Param::ENormG, 1, h, true);
      take(Param::ENormB, 1, h, true, layerNorm);
      take(Param::HNormG, 1, h, true);
      take(Param::HNormB, 1, h, true, layerNorm);
      take(Param::EhProj, 2 * h, h, false);
      take(Param::MtpNormG, 1, h, true);
      take(Param::MtpNormB, 1, h, true, layerNorm);
    }
    take(Param::Norm1G, 1, h, true);
    take(Param::Norm1B, 1, h, true, layerNorm);
    if (t.usesLatentAttention()) {
      // runtime/model/layers/LatentAttention.h: its output projection is H·dv × h.
      const int64_t rq = t.qLoraRank, rkv = t.kvLoraRank,
                    qk = t.numHeads * (t.qkNopeHeadDim + t.qkRopeHeadDim);
      take(Param::Wdq, h, rq, false, rq > 0);
      take(Param::QaNorm, 1, rq, true, rq > 0);
      take(Param::Wuq, rq, qk, false, rq > 0);
      take(Param::Wq, h, qk, false, rq == 0);
      take(Param::Wdkv, h, rkv + t.qkRopeHeadDim, false);
      take(Param::KvaNorm, 1, rkv, true);
      take(Param::Wukv, rkv, t.numHeads * (t.qkNopeHeadDim + t.vHeadDim), false);
    } else {
      take(Param::Wqkv, h, q + 2 * kvd, false);
      take(Param::Bqkv, 1, q + 2 * kvd, true, qkvBias);
    }
    take(Param::Wo, t.usesLatentAttention() ? t.numHeads * t.vHeadDim : q, h, false);
    take(Param::Bo, 1, h, true, otherBias);
    take(Param::QNorm, 1, hd, true, t.qkNorm);
    take(Param::KNorm, 1, hd, true, t.qkNorm);
    take(Param::Norm2G, 1, h, true);
    take(Param::Norm2B, 1, h, true, layerNorm);
    if (experts) {
      take(Param::Moe, 1, moeParams(t), false);
      break;
    }
    take(Param::W1, h, swiglu ? 2 * f : f, false);
    take(Param::B1, 1, swiglu ? 2 * f : f, true, otherBias);
    take(Param::W2, f, h, false);
    take(Param::B2, 1, h, true, otherBias);
    break;
  case LayerKind::Head:
    take(Param::NormG, 1, h, true);
    take(Param::NormB, 1, h, true, layerNorm);
    if (t.tieEmbeddings)
      take(Param::Lm, v, h, false);
    else
      take(Param::Lm, h, v, false);
    break;
  case LayerKind::Custom:
    break;
  }
  return spans;
}

/// Columns `c` of an array `cols` wide: [begin, end), or begin == end when it has none.
std::pair<int64_t, int64_t> columnsOf(Columns c, const Transformer &t, int64_t cols) {
  const int64_t q = t.numHeads * headWidth(t), kvd = t.numKvHeads * headWidth(t),
                f = t.ffnHiddenSize;
  const bool swiglu = t.mlp == 1;
  switch (c) {
  case Columns::All:
    return {0, cols};
  case Columns::Q:
    return {0, q};
  case Columns::K:
    return {q, q + kvd};
  case Columns::V:
    return {q + kvd, q + 2 * kvd};
  case Columns::Gate:
    return swiglu ? std::make_pair(int64_t(0), f) : std::make_pair(int64_t(0), int64_t(0));
  case Columns::Up:
    return swiglu ? std::make_pair(f, 2 * f) : std::make_pair(int64_t(0), f);
  }
  return {0, 0};
}

std::string modelPath(const std::string &dir) {
  return (fs::path(dir) / kHfModelFileName).string();
}
std::string unfinishedPath(const std::string &dir) { return modelPath(dir) + ".tmp"; }

/// The tensors a file holds: all but the tied head's copy.
std::vector<TensorSpec> fileTensors(const std::vector<HfTensor> &tensors) {
  std::vector<TensorSpec> specs;
  for (const HfTensor &t : tensors)
    if (!t.tied)
      specs.push_back({t.name, t.shape});
  return specs;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    absl::StrAppend(&out, i ? ", " : "", shape[i]);
  return out + "]";
}

} // namespace

const char *hfArchitecture(const Plan &plan) {
  if (!plan.transformer)
    return "gpt2";
  const Transformer &t = *plan.transformer;
  if (isDeepSeek(t))
    return "deepseek_v3";
  if (t.isMoe())
    return !isQwenMoe(t) ? "mixtral" : isQwen3(t) ? "qwen3_moe" : "qwen2_moe";
  return isQwen3(t) ? "qwen3" : isLlama(t) ? "llama" : "gpt2";
}

absl::StatusOr<std::vector<HfTensor>> hfTensors(const Plan &plan) {
  if (!plan.transformer)
    return absl::FailedPreconditionError(
        "the plan's model is a layer list, not a transformer: it has no Hugging Face names");
  const Transformer &t = *plan.transformer;
  if (isDeepSeek(t) && t.isMoe() && t.sharedExperts > 0 &&
      t.sharedFfnHiddenSize % t.expertFfnHiddenSize != 0)
    return absl::FailedPreconditionError(absl::StrCat(
        "the shared experts are ", t.sharedFfnHiddenSize, " wide and the routed experts ",
        t.expertFfnHiddenSize,
        ": DeepSeek-V3's names say the shared width as n_shared_experts "
        "routed experts' widths; compile the job again with model.moe.shared_ffn_hidden_size a "
        "multiple of model.moe.expert_ffn_hidden_size to write or read Hugging Face files"));
  if (t.isMoe() && t.sharedExpertGate && isDeepSeek(t))
    return absl::FailedPreconditionError(
        "the shared experts are gated, which DeepSeek-V3's names cannot say (its shared experts "
        "have no gate; Qwen2-MoE's have one); compile the job again with "
        "model.moe.shared_expert_gate false to write or read Hugging Face files");
  if (t.isMoe() && t.routedScalingFactor != 1 && !isDeepSeek(t))
    return absl::FailedPreconditionError(
        absl::StrCat("the routed experts' weights are scaled by ", t.routedScalingFactor,
                     ", which among the Hugging Face families here only DeepSeek-V3's config says "
                     "(routed_scaling_factor, with latent attention); compile the job again with "
                     "model.moe.routed_scaling_factor 1 to write or read Hugging Face files"));
  const bool llama = isLlama(t);
  if (t.mtpLayers > 0 && !llama)
    return absl::FailedPreconditionError(absl::StrCat(
        "the model has ", t.mtpLayers,
        " multi-token prediction module(s), which only DeepSeek-V3's names (the Llama family's) "
        "say; compile the job again with a Llama-style model (model.norm \"rmsnorm\", ...) or "
        "without model.mtp_layers to write or read Hugging Face files"));
  std::vector<HfTensor> out;
  std::string tokenTable;
  int64_t block = 0;
  // A module's own tensors, then its block's.
  std::vector<Module> moduleTensors(std::begin(kMtp), std::end(kMtp));
  moduleTensors.insert(moduleTensors.end(), std::begin(kBlock), std::end(kBlock));
  const int64_t headLayer = static_cast<int64_t>(plan.layers.size()) - 1;
  for (size_t l = 0; l < plan.layers.size(); ++l) {
    const Layer &layer = plan.layers[l];
    const Module *modules = nullptr;
    size_t count = 0;
    std::string prefix;
    const bool experts = layer.kind == LayerKind::Block && t.blockHasExperts(block);
    const int64_t mtpDepth =
        layer.kind == LayerKind::Block && block >= t.numLayers ? block - t.numLayers : -1;
    if (layer.kind == LayerKind::Embedding) {
      modules = kEmbedding;
      count = std::size(kEmbedding);
    } else if (layer.kind == LayerKind::Block) {
      modules = mtpDepth >= 0 ? moduleTensors.data() : kBlock;
      count = mtpDepth >= 0 ? moduleTensors.size() : std::size(kBlock);
      prefix = absl::StrCat(llama ? "model.layers." : "transformer.h.", block++, ".");
    } else if (layer.kind == LayerKind::Head) {
      modules = kHead;
      count = std::size(kHead);
    } else {
      return absl::FailedPreconditionError(
          absl::StrCat("layer ", layer.name, " is a custom layer: it has no Hugging Face names"));
    }
    int64_t total = 0;
    const std::map<Param, Span> spans = layoutOf(layer.kind, t, experts, total, mtpDepth);
    if (total != layer.params)
      return absl::FailedPreconditionError(
          absl::StrCat("layer ", layer.name, ": the plan counts ", layer.params,
                       " parameters; Conduit's layout of this model has ", total,
                       " (the plan was compiled for another architecture)"));
    // Conduit's arrays in layout order, each as the tensors of the modules that hold it.
    for (const auto &[param, s] : spans)
      for (size_t m = 0; m < count; ++m) {
        const Module &module = modules[m];
        const char *name = llama ? module.llama : module.gpt2;
        if (!name || (module.weight != param && module.bias != param))
          continue;
        const auto [begin, end] = columnsOf(llama ? module.columns : Columns::All, t, s.cols);
        if (begin == end)
          continue;
        HfTensor tensor;
        tensor.name = absl::StrCat(prefix, name, module.weight == param ? ".weight" : ".bias");
        tensor.layer = static_cast<int64_t>(l);
        tensor.offset = s.offset;
        tensor.rows = s.rows;
        tensor.cols = s.cols;
        tensor.colBegin = begin;
        tensor.colEnd = end;
        // Hugging Face stores an nn.Linear's weight [out × in]: Llama's projections and both
        // architectures' LM heads. GPT-2's projections are Conv1D, [in × out] as Conduit's.
        tensor.transpose = !s.vector && param != Param::Wte && param != Param::Wpe &&
                           (llama || param == Param::Lm);
        if (param == Param::Lm && t.tieEmbeddings) {
          // [V × h] like the token table, whose values it holds.
          tensor.name = tokenTable;
          tensor.transpose = false;
          tensor.tied = true;
        }
        if (param == Param::Wte && layer.kind == LayerKind::Embedding)
          tokenTable = tensor.name;
        if (t.ropeInterleave && t.position == 1 && t.qkRopeHeadDim > 0) {
          // DeepSeek's layout: each query head's rotary part, and the shared rotary key after
          // the key/value latent, in interleaved pairs (of an even width, with rotary positions:
          // GptShape; without them nothing is rotated and the columns stay as they are).
          if (param == Param::Wuq || param == Param::Wq) {
            tensor.ropePeriod = t.qkNopeHeadDim + t.qkRopeHeadDim;
            tensor.ropeAt = t.qkNopeHeadDim;
            tensor.ropeWidth = t.qkRopeHeadDim;
          } else if (param == Param::Wdkv) {
            tensor.ropePeriod = s.cols;
            tensor.ropeAt = t.kvLoraRank;
            tensor.ropeWidth = t.qkRopeHeadDim;
          }
        }
        if (s.vector)
          tensor.shape = {end - begin};
        else if (tensor.transpose)
          tensor.shape = {end - begin, s.rows};
        else
          tensor.shape = {s.rows, end - begin};
        out.push_back(std::move(tensor));
      }
    if (experts)
      moeTensors(t, prefix, static_cast<int64_t>(l), spans.at(Param::Moe).offset, out);
    if (mtpDepth >= 0 && !t.tieEmbeddings) {
      // The head's matrix the module shares, under the module's name too: written from the
      // head (the same stage) and read into it, before lm_head is.
      int64_t headTotal = 0;
      const Span lm = layoutOf(LayerKind::Head, t, false, headTotal).at(Param::Lm);
      HfTensor shared;
      shared.name = absl::StrCat(prefix, "shared_head.head.weight");
      shared.layer = headLayer;
      shared.offset = lm.offset;
      shared.rows = lm.rows;
      shared.cols = shared.colEnd = lm.cols;
      shared.transpose = true;
      shared.shape = {lm.cols, lm.rows};
      out.push_back(std::move(shared));
    }
  }
  if (t.tieEmbeddings && tokenTable.empty())
    return absl::FailedPreconditionError("the model ties its embeddings but has no embedding");
  return out;
}

int64_t HfTensor::conduitColumn(int64_t c) const {
  if (ropeWidth == 0)
    return colBegin + c;
  const int64_t period = c / ropePeriod, i = c % ropePeriod - ropeAt;
  if (i < 0 || i >= ropeWidth)
    return colBegin + c;
  // Pair (2j, 2j + 1) of Hugging Face's is pair (j, j + ropeWidth/2) of Conduit's.
  const int64_t half = i % 2 == 0 ? i / 2 : ropeWidth / 2 + i / 2;
  return colBegin + period * ropePeriod + ropeAt + half;
}

namespace {
/// HfTensor::conduitColumn of each of the tensor's columns.
std::vector<int64_t> conduitColumns(const HfTensor &t) {
  std::vector<int64_t> columns(t.colEnd - t.colBegin);
  for (int64_t c = 0; c < static_cast<int64_t>(columns.size()); ++c)
    columns[c] = t.conduitColumn(c);
  return columns;
}
} // namespace

void exportHfTensor(const HfTensor &t, const float *layerParams, float *out) {
  if (t.zero) {
    std::fill(out, out + t.elements(), 0.0f);
    return;
  }
  const float *m = layerParams + t.offset;
  const int64_t width = t.colEnd - t.colBegin;
  const std::vector<int64_t> column = conduitColumns(t);
  for (int64_t r = 0; r < t.rows; ++r)
    for (int64_t c = 0; c < width; ++c) {
      const float value = t.scale * m[r * t.cols + column[c]];
      if (t.transpose)
        out[c * t.rows + r] = value;
      else
        out[r * width + c] = value;
    }
}

void importHfTensor(const HfTensor &t, const float *values, float *layerParams) {
  if (t.zero)
    return;
  float *m = layerParams + t.offset;
  const int64_t width = t.colEnd - t.colBegin;
  const std::vector<int64_t> column = conduitColumns(t);
  for (int64_t r = 0; r < t.rows; ++r)
    for (int64_t c = 0; c < width; ++c)
      m[r * t.cols + column[c]] =
          (t.transpose ? values[c * t.rows + r] : values[r * width + c]) / t.scale;
}

absl::Status checkHfTensors(const SafeTensorsHeader &header, const std::vector<HfTensor> &expected,
                            const std::string &path) {
  std::map<std::string, const HfTensor *> wanted;
  for (const HfTensor &t : expected)
    wanted.emplace(t.name, &t);
  auto bad = [&](const std::string &name, const std::string &why) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": tensor \"", name, "\" ", why));
  };
  auto isFloat = [](const TensorEntry &t) {
    return t.dtype == "F32" || t.dtype == "BF16" || t.dtype == "F16";
  };
  // The block scales an F8_E4M3 matrix [r, c] needs: [⌈r / 128⌉, ⌈c / 128⌉].
  auto blocks = [](const TensorEntry &t) {
    return std::vector<int64_t>{(t.shape[0] + kFp8Block - 1) / kFp8Block,
                                (t.shape[1] + kFp8Block - 1) / kFp8Block};
  };
  for (const TensorEntry &t : header.tensors) {
    const std::string suffix = kFp8ScaleSuffix;
    if (t.name.size() > suffix.size() &&
        t.name.compare(t.name.size() - suffix.size(), suffix.size(), suffix) == 0) {
      const std::string weight = t.name.substr(0, t.name.size() - suffix.size());
      const TensorEntry *w = header.find(weight);
      const auto want = wanted.find(weight);
      if (w && want != wanted.end() && w->dtype == "F8_E4M3") {
        if (w->shape != want->second->shape || w->shape.size() != 2)
          continue; // the weight's own check refuses it
        if (!isFloat(t))
          return bad(t.name, absl::StrCat("has dtype ", t.dtype,
                                          "; the scales of an FP8 weight are F32, BF16 or F16"));
        if (t.shape != blocks(*w))
          return bad(t.name,
                     absl::StrCat("has shape ", shapeText(t.shape), "; the scales of \"", weight,
                                  "\" ", shapeText(w->shape), " in blocks of ", kFp8Block, " x ",
                                  kFp8Block, " are ", shapeText(blocks(*w))));
        continue;
      }
    }
    const auto want = wanted.find(t.name);
    if (want == wanted.end())
      return bad(t.name, "is not a parameter of this model");
    if (t.dtype == "F8_E4M3") {
      if (t.shape.size() != 2)
        return bad(t.name, "is F8_E4M3 and not a matrix; conduit-run reads FP8 matrices with "
                           "block scales only");
      if (!header.find(t.name + kFp8ScaleSuffix))
        return bad(t.name, absl::StrCat("is F8_E4M3 without its block scales \"", t.name,
                                        kFp8ScaleSuffix, "\""));
    } else if (!isFloat(t)) {
      return bad(t.name, absl::StrCat("has dtype ", t.dtype,
                                      "; conduit-run reads F32, BF16, F16 and F8_E4M3 with block "
                                      "scales"));
    }
    if (t.shape != want->second->shape)
      return bad(t.name, absl::StrCat("has shape ", shapeText(t.shape), "; the model needs ",
                                      shapeText(want->second->shape)));
  }
  for (const HfTensor &t : expected)
    if (!header.find(t.name))
      return bad(t.name, absl::StrCat("is missing (the model needs ", shapeText(t.shape), ")"));
  return absl::OkStatus();
}

absl::Status beginHfModel(const Plan &plan, const std::string &dir, int64_t step) {
  CONDUIT_ASSIGN_OR_RETURN(std::vector<HfTensor> tensors, hfTensors(plan));
  // "format" is what Hugging Face's loaders require ("pt": PyTorch's names and layouts).
  CONDUIT_ASSIGN_OR_RETURN(
      SafeTensorsLayout layout,
      layoutSafeTensors(fileTensors(tensors), {{"format", "pt"},
                                               {"conduit.architecture", hfArchitecture(plan)},
                                               {kHfStepKey, absl::StrCat(step)}}));
  std::error_code error;
  fs::create_directories(dir, error);
  if (error)
    return absl::UnavailableError(absl::StrCat("cannot create ", dir, ": ", error.message()));
  const fs::path config = fs::path(dir) / "config.json";
  {
    std::ofstream out(config, std::ios::trunc);
    out << hfConfigJson(plan);
    if (!out)
      return absl::UnavailableError(absl::StrCat("cannot write ", config.string()));
  }
  const std::string path = unfinishedPath(dir);
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(layout.prefix.data(), static_cast<std::streamsize>(layout.prefix.size()));
    if (!out)
      return absl::UnavailableError(absl::StrCat("cannot write ", path));
  }
  fs::resize_file(path, layout.fileBytes, error);
  if (error)
    return absl::UnavailableError(absl::StrCat("cannot size ", path, ": ", error.message()));
  return absl::OkStatus();
}

absl::Status writeHfLayers(const Plan &plan, const std::string &dir, int64_t first, int64_t end,
                           const float *params) {
  CONDUIT_ASSIGN_OR_RETURN(std::vector<HfTensor> tensors, hfTensors(plan));
  const std::string path = unfinishedPath(dir);
  CONDUIT_ASSIGN_OR_RETURN(SafeTensorsReader file, SafeTensorsReader::open(path));
  std::vector<int64_t> offsets{0};
  for (int64_t l = first; l < end; ++l)
    offsets.push_back(offsets.back() + plan.layers[l].params);
  std::vector<float> values;
  for (const HfTensor &t : tensors) {
    if (t.layer < first || t.layer >= end || t.tied)
      continue;
    const TensorEntry *entry = file.header().find(t.name);
    if (!entry || entry->dtype != "F32" || entry->elements() != t.elements())
      return absl::InternalError(absl::StrCat(path, " has no room for tensor \"", t.name, "\""));
    values.resize(t.elements());
    exportHfTensor(t, params + offsets[t.layer - first], values.data());
    CONDUIT_RETURN_IF_ERROR(
        writeFloatsAt(path, file.header().dataStart + entry->begin, values.data(), t.elements()));
  }
  return absl::OkStatus();
}

absl::Status finishHfModel(const std::string &dir) {
  std::error_code error;
  fs::rename(unfinishedPath(dir), modelPath(dir), error);
  if (error)
    return absl::UnavailableError(
        absl::StrCat("cannot rename ", unfinishedPath(dir), ": ", error.message()));
  return absl::OkStatus();
}

absl::Status writeHfModel(const Plan &plan, const std::string &dir, const float *params,
                          int64_t step) {
  CONDUIT_RETURN_IF_ERROR(beginHfModel(plan, dir, step));
  CONDUIT_RETURN_IF_ERROR(
      writeHfLayers(plan, dir, 0, static_cast<int64_t>(plan.layers.size()), params));
  return finishHfModel(dir);
}

} // namespace conduit::runtime
