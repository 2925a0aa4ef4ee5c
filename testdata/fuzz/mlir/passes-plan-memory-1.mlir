// Full sharding over two replicas: shards of parameters (200), moments (400) and gradients
// (200), the gathered parameters (400) and, from the first backward to the reduce-scatter,
// the full fp32 gradient buffer (400): 1600 bytes, plus 28 of activations and buffers.
pipe.model @tiny phase communicating attributes {cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 1.0, efficiency = 1.0, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 300000000000.0, inter_node_bandwidth = 25000000000.0, latency_s = 0.0, launch_overhead_s = 0.0, profile = "">, parallelism = #pipe.parallelism<pipeline = 2, data = 2, stages_per_device = 1, schedule = "gpipe", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "full", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">, source = "tiny.json", training = #pipe.training<dtype = "fp32", optimizer = "adam", seed = 1234, learning_rate = 0.001>} {
  pipe.layer "a" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 0 output 4
  pipe.layer "b" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 1, 2]
  pipe.rank 0 {
    pipe.unshard stage 0 bytes 400
    pipe.forward stage 0 mb 0
    pipe.send activation stage 0 mb 0 to 1 stage 1 mb 0 samples [0, 1) bytes 4
    pipe.forward stage 0 mb 1
    pipe.send activation stage 0 mb 1 to 1 stage 1 mb 1 samples [1, 2) bytes 4
    pipe.recv gradient stage 0 mb 1 from 1 stage 1 mb 1 samples [1, 2) bytes 4
    pipe.backward stage 0 mb 1
    pipe.recv gradient stage 0 mb 0 from 1 stage 1 mb 0 samples [0, 1) bytes 4
    pipe.backward stage 0 mb 0
    pipe.reshard stage 0
    pipe.reduce_grad stage 0 bytes 400 reduce_scatter
    pipe.optimizer_step stage 0
  }
  pipe.rank 1 {
    pipe.unshard stage 1 bytes 400
    pipe.recv activation stage 1 mb 0 from 0 stage 0 mb 0 samples [0, 1) bytes 4
    pipe.forward stage 1 mb 0
    pipe.recv activation stage 1 mb 1 from 0 stage 0 mb 1 samples [1, 2) bytes 4
    pipe.forward stage 1 mb 1
    pipe.backward stage 1 mb 1
    pipe.send gradient stage 1 mb 1 to 0 stage 0 mb 1 samples [1, 2) bytes 4
    pipe.backward stage 1 mb 0
    pipe.reshard stage 1
    pipe.reduce_grad stage 1 bytes 400 reduce_scatter
    pipe.send gradient stage 1 mb 0 to 0 stage 0 mb 0 samples [0, 1) bytes 4
    pipe.optimizer_step stage 1
  }
}
