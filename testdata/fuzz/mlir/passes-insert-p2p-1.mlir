// 1F1B with transfers as long as a compute: the steady-state exchanges of the two
// neighbours become batches on both sides.

pipe.model @tiny1f1b phase scheduled attributes {cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 1.0, efficiency = 1.0, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 4.0, inter_node_bandwidth = 25000000000.0, latency_s = 0.0, launch_overhead_s = 0.0, profile = "">, parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "1f1b", group_size = 2, microbatches = 4, microbatch_size = 1, sharding = "none", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">, source = "tiny1f1b.json", training = #pipe.training<dtype = "fp32", optimizer = "adam", seed = 1234, learning_rate = 0.001>} {
  pipe.layer "a" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 0 output 4
  pipe.layer "b" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2, 3, 4]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 1, 2, 3, 4]
  pipe.rank 0 {
    pipe.forward stage 0 mb 0
    pipe.forward stage 0 mb 1
    pipe.backward stage 0 mb 0
    pipe.forward stage 0 mb 2
    pipe.backward stage 0 mb 1
    pipe.forward stage 0 mb 3
    pipe.backward stage 0 mb 2
    pipe.backward stage 0 mb 3
  }
  pipe.rank 1 {
    pipe.forward stage 1 mb 0
    pipe.backward stage 1 mb 0
    pipe.forward stage 1 mb 1
    pipe.backward stage 1 mb 1
    pipe.forward stage 1 mb 2
    pipe.backward stage 1 mb 2
    pipe.forward stage 1 mb 3
    pipe.backward stage 1 mb 3
  }
}
