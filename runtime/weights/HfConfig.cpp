//===- HfConfig.cpp - the plan's model as a Hugging Face config.json -----===//

#include "runtime/weights/HfFamily.h"
#include "runtime/weights/HfWeights.h"

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <string_view>

namespace conduit::runtime {

namespace {
/// The rotary context extension under Hugging Face's rope_scaling keys, yarn's magnitude stated
/// (attention_factor) rather than left to the library's rule.
nlohmann::ordered_json ropeScalingConfig(const RopeScaling &r) {
  nlohmann::ordered_json c;
  c["rope_type"] = std::string(kRopeTypeNames[static_cast<size_t>(r.type)]);
  c["factor"] = r.factor;
  if (r.type == RopeType::Linear)
    return c;
  c["original_max_position_embeddings"] = r.originalPositions;
  if (r.type == RopeType::Dynamic)
    return c;
  if (r.type == RopeType::Llama3) {
    c["low_freq_factor"] = r.lowFreqFactor;
    c["high_freq_factor"] = r.highFreqFactor;
    return c;
  }
  c["beta_fast"] = r.betaFast;
  c["beta_slow"] = r.betaSlow;
  c["attention_factor"] = r.attentionFactor;
  if (r.mscaleAllDim != 0)
    c["mscale_all_dim"] = r.mscaleAllDim;
  if (!r.truncate)
    c["truncate"] = false;
  return c;
}

/// DeepSeek-V3's keys: the latent attention's widths and the plan's rotary layout
/// (rope_interleave: false, Hugging Face's DeepseekV3Attention rotates halves as
/// runtime/model/Kernels.h does; true, interleaved pairs, the columns permuted to match), its
/// multi-token prediction modules, and its mixture of experts: the routed experts, the shared
/// ones as a multiple of their width, the leading dense blocks (all of them without experts),
/// the routing (sigmoid scores limited to groups, or softmax) with the routed experts' scaling
/// and the auxiliary loss's coefficient.
void deepSeekConfig(const Transformer &t, nlohmann::ordered_json &c) {
  if (t.qLoraRank > 0)
    c["q_lora_rank"] = t.qLoraRank;
  else
    c["q_lora_rank"] = nullptr;
  c["kv_lora_rank"] = t.kvLoraRank;
  c["qk_nope_head_dim"] = t.qkNopeHeadDim;
  c["qk_rope_head_dim"] = t.qkRopeHeadDim;
  c["v_head_dim"] = t.vHeadDim;
  c["rope_interleave"] = t.ropeInterleave;
  c["num_nextn_predict_layers"] = t.mtpLayers;
  if (!t.isMoe()) {
    c["first_k_dense_replace"] = t.numLayers;
    return;
  }
  c["n_routed_experts"] = t.numExperts;
  c["num_experts_per_tok"] = t.topK;
  c["moe_intermediate_size"] = t.expertFfnHiddenSize;
  c["n_shared_experts"] = t.sharedExperts > 0 ? t.sharedFfnHiddenSize / t.expertFfnHiddenSize : 0;
  c["first_k_dense_replace"] = t.denseLayers;
  c["norm_topk_prob"] = t.normalizeTopK;
  c["n_group"] = t.routerGroups;
  c["topk_group"] = t.routerGroupTopK;
  c["routed_scaling_factor"] = t.routedScalingFactor;
  // DeepSeek's pairs: sigmoid scores chosen with the per-expert bias, or softmax greedily.
  c["scoring_func"] = t.router == 1 ? "sigmoid" : "softmax";
  c["topk_method"] = t.router == 1 ? "noaux_tc" : "greedy";
  c["aux_loss_alpha"] = t.auxLossCoefficient;
}
} // namespace

std::string hfModelType(const Plan &plan) {
  const Transformer &t = *plan.transformer;
  // hfArchitecture names a Qwen2 model by the Llama names it takes.
  const bool qwen2 = isLlama(t) && !isDeepSeek(t) && !isQwen3(t) && t.bias == 1;
  return !t.isMoe() && qwen2 ? "qwen2" : hfArchitecture(plan);
}

std::string hfConfigJson(const Plan &plan) {
  const Transformer &t = *plan.transformer;
  const bool llama = isLlama(t), qwen3 = isQwen3(t),
             qwen = llama && !isDeepSeek(t) && (t.bias == 1 || qwen3);
  // Each model_type's class, as Hugging Face names it.
  const std::map<std::string, const char *> classes = {
      {"gpt2", "GPT2LMHeadModel"},          {"llama", "LlamaForCausalLM"},
      {"qwen2", "Qwen2ForCausalLM"},        {"qwen3", "Qwen3ForCausalLM"},
      {"mixtral", "MixtralForCausalLM"},    {"qwen2_moe", "Qwen2MoeForCausalLM"},
      {"qwen3_moe", "Qwen3MoeForCausalLM"}, {"deepseek_v3", "DeepseekV3ForCausalLM"}};
  const std::string type = hfModelType(plan);
  nlohmann::ordered_json c;
  c["architectures"] = {classes.at(type)};
  c["model_type"] = type;
  // What both configurations hold, each under its own name.
  const std::tuple<const char *, const char *, int64_t> sizes[] = {
      {"hidden_size", "n_embd", t.hiddenSize},
      {"intermediate_size", "n_inner", t.ffnHiddenSize},
      {"num_attention_heads", "n_head", t.numHeads},
      {"num_hidden_layers", "n_layer", t.numLayers},
      {"max_position_embeddings", "n_positions", t.seqLength},
      {"vocab_size", "vocab_size", t.vocabSize}};
  for (const auto &[llamaName, gpt2Name, value] : sizes)
    c[llama ? llamaName : gpt2Name] = value;
  c[llama ? "rms_norm_eps" : "layer_norm_epsilon"] = t.normEps;
  c["tie_word_embeddings"] = t.tieEmbeddings;
  if (llama) {
    c["num_key_value_heads"] = t.numKvHeads;
    if (t.headDim != 0 || qwen3)
      c["head_dim"] = headWidth(t);
    c["rope_theta"] = t.ropeTheta;
    if (const RopeScaling &r = t.ropeScaling; r.scaled()) {
      c["rope_scaling"] = ropeScalingConfig(r);
      // A yarn model's positions are its extended context, as DeepSeek's and Qwen's configs
      // say them: versions of the transformers library (4.5x) take yarn's factor as
      // max_position_embeddings / original_max_position_embeddings.
      if (r.type == RopeType::Yarn)
        c["max_position_embeddings"] =
            std::llround(static_cast<double>(r.originalPositions) * r.factor);
      // The library's dynamic scaling grows the base past max_position_embeddings: the
      // positions the plan's own grow past, whatever length it trained.
      if (r.type == RopeType::Dynamic)
        c["max_position_embeddings"] = r.originalPositions;
    }
    if (isDeepSeek(t)) {
      // DeepSeek-V3's attention_bias would put biases on the down projections too: its output
      // projection's (bias "all") is Conduit's only, and its MLPs have none.
      c["attention_bias"] = false;
    } else if (qwen3) {
      // Qwen3's attention_bias puts biases on q, k, v and o; its MLPs have none.
      c["attention_bias"] = t.bias == 0;
    } else if (!qwen) {
      c["attention_bias"] = t.bias == 0;
      c["mlp_bias"] = t.bias == 0;
    }
    c["hidden_act"] = t.mlp == 1 ? "silu" : "gelu_pytorch_tanh";
    if (isDeepSeek(t)) {
      deepSeekConfig(t, c);
    } else if (t.isMoe() && isQwenMoe(t)) {
      c["num_experts"] = t.numExperts;
      c["num_experts_per_tok"] = t.topK;
      c["moe_intermediate_size"] = t.expertFfnHiddenSize;
      if (!qwen3)
        c["shared_expert_intermediate_size"] = t.sharedExperts > 0 ? t.sharedFfnHiddenSize : 0;
      c["norm_topk_prob"] = t.normalizeTopK;
      c["decoder_sparse_step"] = 1;
      std::vector<int64_t> dense(t.denseLayers);
      for (int64_t b = 0; b < t.denseLayers; ++b)
        dense[b] = b;
      c["mlp_only_layers"] = dense;
    } else if (t.isMoe()) {
      // Mixtral's intermediate_size is its experts' width.
      c["intermediate_size"] = t.expertFfnHiddenSize;
      c["num_local_experts"] = t.numExperts;
      c["num_experts_per_tok"] = t.topK;
    }
    if (t.isMoe() && !isDeepSeek(t)) {
      c["router_aux_loss_coef"] = t.auxLossCoefficient;
      c["output_router_logits"] = t.auxLossCoefficient > 0;
    }
  } else {
    // runtime/model/Kernels.cpp computes GELU with the tanh approximation.
    c["activation_function"] = "gelu_new";
  }
  c["torch_dtype"] = "float32";
  return c.dump(2) + "\n";
}

std::vector<std::string> hfConfigOmissions(const Plan &plan) {
  const Transformer &t = *plan.transformer;
  std::vector<std::string> out;
  if (!isLlama(t)) {
    if (t.bias != 0)
      out.push_back(std::string("parts without biases (model.bias \"") +
                    (t.bias == 1 ? "qkv" : "none") + "\"): GPT-2's layers all have them");
    if (t.numKvHeads != t.numHeads)
      out.push_back("grouped-query attention (model.num_kv_heads): GPT-2 has a key and a value "
                    "per query head");
    return out;
  }
  const bool deepSeek = isDeepSeek(t), qwen3 = isQwen3(t);
  if (t.norm != 1)
    out.emplace_back("LayerNorm (model.norm): Llama's family normalises by RMSNorm");
  if (t.position != 1)
    out.emplace_back("learned positions (model.position): Llama's family rotates");
  if (t.mlp != 1)
    out.emplace_back("a GELU MLP without a gate (model.mlp): Llama's family gates its MLPs");
  // Llama's config says biases on every projection or none (attention_bias, mlp_bias), Qwen2's
  // and Qwen2-MoE's have them on q, k and v always, Mixtral's, Qwen3's and DeepSeek-V3's never.
  const std::string_view family = hfArchitecture(plan);
  const bool mixtral = family == "mixtral", qwen2Moe = family == "qwen2_moe";
  if (qwen2Moe && t.bias != 1)
    out.emplace_back(t.bias == 0 ? "biases beyond q, k and v (model.bias): Qwen2-MoE has them "
                                   "on q, k and v alone"
                                 : "an attention without biases (model.bias): Qwen2-MoE has "
                                   "them on q, k and v");
  else if ((t.bias == 0 && (qwen3 || deepSeek || mixtral)) || (t.bias == 1 && (qwen3 || deepSeek)))
    out.emplace_back("the biases (model.bias): this family's config has no key for them");
  // DeepSeek-V3's config counts the modules, which its Hugging Face model does not run: a job
  // on the file plans them only with the key beside `path` (job-file.md).
  if (t.mtpLayers > 0)
    out.emplace_back(deepSeek ? "multi-token prediction modules (model.mtp_layers): the config "
                                "counts them (num_nextn_predict_layers), and a job on it plans "
                                "them only with the key beside its path"
                              : "multi-token prediction modules (model.mtp_layers): only "
                                "DeepSeek-V3's config counts them");
  if (!t.isMoe())
    return out;
  if (mixtral && t.denseLayers > 0)
    out.emplace_back("dense leading blocks (model.moe.dense_layers): Mixtral has experts in "
                     "every block");
  if (mixtral && !t.normalizeTopK)
    out.emplace_back("the chosen experts' weights left as routed (model.moe.normalize_top_k): "
                     "Mixtral renormalises them");
  if (t.router == 1 && !deepSeek)
    out.emplace_back("the sigmoid router (model.moe.router): Mixtral and Qwen route by softmax");
  if (t.router != 1 && deepSeek)
    out.emplace_back("the softmax router (model.moe.router): Hugging Face's DeepSeek-V3 routes "
                     "by sigmoid only");
  if (t.groupLimited() && !deepSeek)
    out.emplace_back("group-limited routing (model.moe.router_groups): Mixtral and Qwen route "
                     "over every expert");
  if (t.groupLimited() && deepSeek && t.router != 1)
    out.emplace_back("group-limited routing with the softmax router (model.moe.router_groups): "
                     "DeepSeek-V3's config limits the groups with its sigmoid router only");
  if (qwen3 && !deepSeek && t.sharedExperts > 0)
    out.emplace_back("shared experts (model.moe.shared_experts): Qwen3-MoE has none");
  if (t.capacityFactor > 0)
    out.emplace_back("the experts' capacity (model.moe.capacity_factor): Hugging Face's "
                     "models drop no token");
  return out;
}

} // namespace conduit::runtime
