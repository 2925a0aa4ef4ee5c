// rope_scaling: a key its type does not read
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 2, stages_per_device = 1, schedule = "1f1b", group_size = 1, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  // expected-error @+2 {{attention_factor is set and rope_type llama3 does not read it}}
  // expected-error @+1 {{failed to parse Pipe_TransformerAttr parameter 'rope_scaling' which is to be a `RopeScalingAttr`}}
  architecture = #pipe.transformer<num_layers = 2, hidden_size = 8, num_heads = 2, num_kv_heads = 2, ffn_hidden_size = 32, seq_length = 4, vocab_size = 16, mlp = "swiglu", norm = "rmsnorm", position = "rotary", tie_embeddings = false, bias = "none", rope_scaling = #pipe.rope_scaling<rope_type = "llama3", factor = 8.0, original_max_position_embeddings = 8192, attention_factor = 1.5>>} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}
