//
// Two ranks, one layer of 100 parameters each (fp32, Adam), two micro-batches of one sample;
// a layer keeps 8 bytes of activations per sample and sends 4. Each rank holds its receive
// slots (conduit-lower-to-plan's, two of 4 bytes here) for the whole step.

// One replica. Rank 0: parameters 400 + Adam moments 800 + fp32 gradients 400 + receive
// slots 8 = 1608 bytes always; at its peak it holds two micro-batches of activations (16) and
// an output for rank 1 (4): 1628. Rank 1 peaks at its first backward, holding both
// activations and the input gradient that backward writes for rank 0 (4): 1628. An output
// exists from the compute that writes it until the compute after its last send.
pipe.model @tiny_d1 phase communicating attributes {cluster = #pipe.cluster<preset = "a100-80gb", peak_flops = 1.0, efficiency = 1.0, memory_bandwidth = 2.039e12, memory_bytes = 85899345920, gpus_per_node = 8, intra_node_bandwidth = 300000000000.0, inter_node_bandwidth = 25000000000.0, latency_s = 0.0, launch_overhead_s = 0.0, profile = "">, parallelism = #pipe.parallelism<pipeline = 2, data = 1, stages_per_device = 1, schedule = "gpipe", group_size = 2, microbatches = 2, microbatch_size = 1, sharding = "full", checkpointing = "none", fsdp_window = 2, rank_order = "data-inner">, source = "tiny_d1.json", training = #pipe.training<dtype = "fp32", optimizer = "adam", seed = 1234, learning_rate = 0.001>} {
  pipe.layer "a" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 0 output 4
  pipe.layer "b" custom params 100 fwd 1.0 bwd 2.0 activation 8 checkpoint 4 output 4
  pipe.stage 0 layers [0, 1) rank 0 samples [0, 1, 2]
  pipe.stage 1 layers [1, 2) rank 1 samples [0, 1, 2]
  pipe.rank 0 {
    pipe.forward stage 0 mb 0
    pipe.send activation stage 0 mb 0 to 1 stage 1 mb 0 samples [0, 1) bytes 4
    pipe.forward stage 0 mb 1
    pipe.send activation stage 0 mb 1 to 1 stage 1 mb 1 samples [1, 2) bytes 4
    pipe.recv gradient stage 0 mb 1 from 1 stage 1 mb 1 samples [1, 2) bytes 4
    pipe.backward stage 0 mb 1
    pipe.recv gradient stage 0 mb 0 from 1 stage 1 mb 0 samples [0, 1) bytes 4
    pipe.backward stage 0 mb 0
    pipe.optimizer_step stage 0
  }
  pipe.rank 1 {
    pipe.recv activation stage 1 mb 0 from 0 stage 0 mb 0 samples [0, 1) bytes 4
    pipe.forward stage 1 mb 0
    pipe.recv activation stage 1 mb 1 from 0 stage 0 mb 1 samples [1, 2) bytes 4
    pipe.forward stage 1 mb 1
    pipe.backward stage 1 mb 1
    pipe.send gradient stage 1 mb 1 to 0 stage 0 mb 1 samples [1, 2) bytes 4
    pipe.backward stage 1 mb 0
    pipe.send gradient stage 1 mb 0 to 0 stage 0 mb 0 samples [0, 1) bytes 4
    pipe.optimizer_step stage 1
  }
}
