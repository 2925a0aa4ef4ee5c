// tie_grads: the other copy's stage is not on the peer rank
plan.program @p attributes {
  parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 3.12e14, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 3.0e11, inter_node_bandwidth = 2.5e10, latency_s = 1.0e-5, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>,
  groups = [array<i64: 0>, array<i64: 1>], tokens_per_sample = 1} {
  plan.layer "a" embedding params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.layer "b" head params 10 fwd 1.0 bwd 2.0 activation 4 checkpoint 2 output 2
  plan.stage 0 rank 0 layers [0, 1) params 10 samples [0, 1, 2]
  plan.stage 1 rank 1 layers [1, 2) params 10 samples [0, 2]
  plan.rank 0 events 1 slots [64] {
    // expected-error @+1 {{ties with stage 1 on rank 0, but the stage is placed on rank 1}}
    plan.tie_grads stage 0 with 0 stage 1 bytes 40 on 1
  }
  plan.rank 1 events 1 slots [64] {
  }
}
