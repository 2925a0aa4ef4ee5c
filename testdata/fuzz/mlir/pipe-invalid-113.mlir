// training.adam_moments "bf16" needs Adam
pipe.model @m phase model attributes {
  parallelism = #pipe.parallelism<pipeline = 1, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  // expected-error @+1 {{adam_moments "bf16" needs optimizer "adam"}}
  training = #pipe.training<dtype = "bf16", optimizer = "sgd", seed = 1234, learning_rate = 1.0e-3, adam_moments = "bf16">} {
  pipe.layer "embedding" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  pipe.layer "head" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
}
