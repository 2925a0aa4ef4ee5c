// METHOD: error: conduit-optimize-microbatches: unknown method 'annealing'; use greedy, dp, genetic, descent or best

// The search covers GPipe and 1F1B with one stage per rank.
// expected-error @+1 {{microbatch_partitions "auto" searches gpipe and 1f1b schedules; this job uses breadth-first}}
  pipe.model @opt phase split attributes {cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 312000000000000.0, efficiency = 0.5, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 1, intra_node_bandwidth = 300000000000.0, inter_node_bandwidth = 2000000000.0, latency_s = 1.0e-05, launch_overhead_s = 2.0e-05, profile = "">, microbatch_partitions = "auto", parallelism = #pipe.parallelism<pipeline = 3, data = 1, stages_per_device = 1, schedule = "breadth-first", group_size = 3, microbatches = 4, microbatch_size = 2, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">, source = "opt.json", training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 0.001>} {
    pipe.layer "a" custom params 1000 fwd 2000000000.0 bwd 4000000000.0 activation 1000000 checkpoint 0 output 4000000
    pipe.layer "b" custom params 3000 fwd 6000000000.0 bwd 12000000000.0 activation 1000000 checkpoint 4000000 output 2000000
    pipe.layer "c" custom params 2000 fwd 1000000000.0 bwd 2000000000.0 activation 1000000 checkpoint 2000000 output 4
    pipe.stage 0 layers [0, 1) rank 0 samples [0, 2, 4, 6, 8]
    pipe.stage 1 layers [1, 2) rank 1 samples [0, 2, 4, 6, 8]
    pipe.stage 2 layers [2, 3) rank 2 samples [0, 2, 4, 6, 8]
  }
