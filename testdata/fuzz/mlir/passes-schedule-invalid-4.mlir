// expected-error @+1 {{depth-first needs at least as many micro-batches as pipeline ranks (M = 2 < P = 4); use M >= 4, or breadth-first, which accepts any M}}
pipe.model @m phase split attributes {
  parallelism = #pipe.parallelism<pipeline = 4, data = 1, stages_per_device = 2, schedule = "depth-first", group_size = 4, microbatches = 2, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">,
  cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 1.0, efficiency = 1.0, memory_bandwidth = 1.0e30, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 1.0e30, inter_node_bandwidth = 1.0e30, latency_s = 0.0, launch_overhead_s = 0.0, profile = "">,
  training = #pipe.training<dtype = "bf16", optimizer = "adam", seed = 1234, learning_rate = 1.0e-3>} {
  pipe.layer "l0" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l1" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l2" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l3" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l4" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l5" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l6" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.layer "l7" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 1, 2]
  pipe.stage 2 layers [2, 3) rank 2 samples [0, 1, 2]
  pipe.stage 3 layers [3, 4) rank 3 samples [0, 1, 2]
  pipe.stage 4 layers [4, 5) rank 0 samples [0, 1, 2]
  pipe.stage 5 layers [5, 6) rank 1 samples [0, 1, 2]
  pipe.stage 6 layers [6, 7) rank 2 samples [0, 1, 2]
  pipe.stage 7 layers [7, 8) rank 3 samples [0, 1, 2]
}
