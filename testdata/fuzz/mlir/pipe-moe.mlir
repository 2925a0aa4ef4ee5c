//
// A mixture of experts with latent attention and expert parallelism prints and parses back to
// the same IR: the nested #pipe.moe and #pipe.latent_attention, the parallelism's `expert`, the
// transformer's `head_dim` and `qk_norm`, the experts' `kernels`, `routed_scaling_factor` and
// `shared_expert_gate`, a
// layer's `expert_params`, and the rotary context extensions (#pipe.rope_scaling); defaults not
// printed.

pipe.model @moe phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner", expert = 2>,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "swiglu", norm = "rmsnorm", position = "rotary", tie_embeddings = false, bias = "none", latent_attention = #pipe.latent_attention<q_lora_rank = 0, kv_lora_rank = 4, qk_nope_head_dim = 4, qk_rope_head_dim = 2, v_head_dim = 4>, moe = #pipe.moe<num_experts = 4, top_k = 2, expert_ffn_hidden_size = 8, router = "sigmoid", normalize_top_k = true, aux_loss_coefficient = 0.001, shared_experts = 1, shared_ffn_hidden_size = 8, dense_layers = 1, capacity_factor = 1.25, imbalance = 1.5, kernels = "megatron", shared_expert_gate = true>>} {
  pipe.layer "embedding" embedding params 128 fwd 1.0 bwd 2.0 activation 16 checkpoint 16 output 16
  pipe.layer "block.0" block params 100 fwd 1.0 bwd 2.0 activation 16 checkpoint 16 output 16
  pipe.layer "block.1" block params 500 fwd 1.0 bwd 2.0 activation 16 checkpoint 16 output 16 expert_params 400
  pipe.layer "head" head params 128 fwd 1.0 bwd 2.0 activation 16 checkpoint 16 output 4
}

pipe.model @deepseek phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  architecture = #pipe.transformer<num_layers = 1, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "swiglu", norm = "rmsnorm", position = "rotary", tie_embeddings = false, bias = "none", moe = #pipe.moe<num_experts = 4, top_k = 2, expert_ffn_hidden_size = 8, router = "sigmoid", routed_scaling_factor = 2.5>, rope_scaling = #pipe.rope_scaling<rope_type = "yarn", factor = 40.0, original_max_position_embeddings = 4096, beta_fast = 16.0, beta_slow = 2.0, truncate = false, attention_factor = 1.25, mscale_all_dim = 0.707>>} {
  pipe.layer "embedding" embedding params 128 fwd 1.0 bwd 2.0 activation 16 checkpoint 16 output 16
  pipe.layer "block.0" block params 500 fwd 1.0 bwd 2.0 activation 16 checkpoint 16 output 16 expert_params 400
  pipe.layer "head" head params 128 fwd 1.0 bwd 2.0 activation 16 checkpoint 16 output 4
}

pipe.model @llama31 phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  architecture = #pipe.transformer<num_layers = 1, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "swiglu", norm = "rmsnorm", position = "rotary", tie_embeddings = false, bias = "none", rope_scaling = #pipe.rope_scaling<rope_type = "llama3", factor = 8.0, original_max_position_embeddings = 8192, low_freq_factor = 2.0, high_freq_factor = 8.0>>} {
  pipe.layer "embedding" embedding params 128 fwd 1.0 bwd 2.0 activation 16 checkpoint 16 output 16
  pipe.layer "block.0" block params 100 fwd 1.0 bwd 2.0 activation 16 checkpoint 16 output 16
  pipe.layer "head" head params 128 fwd 1.0 bwd 2.0 activation 16 checkpoint 16 output 4
}

pipe.model @qwen3 phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  architecture = #pipe.transformer<num_layers = 1, hidden_size = 8, num_heads = 2, num_kv_heads = 1, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "swiglu", norm = "rmsnorm", position = "rotary", tie_embeddings = false, bias = "none", head_dim = 16, qk_norm = true, moe = #pipe.moe<num_experts = 4, top_k = 1, expert_ffn_hidden_size = 8>>} {
  pipe.layer "embedding" embedding params 128 fwd 1.0 bwd 2.0 activation 16 checkpoint 16 output 16
  pipe.layer "block.0" block params 500 fwd 1.0 bwd 2.0 activation 16 checkpoint 16 output 16 expert_params 400
  pipe.layer "head" head params 128 fwd 1.0 bwd 2.0 activation 16 checkpoint 16 output 4
}
