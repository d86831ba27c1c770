"""The process around a job: what every command shares and nothing model-specific. No TensorFlow at import.

    exit_codes    the commands' exit codes, one meaning each, and the errors that carry them (LockHeld, RuntimeLost)
    lock          one run per output directory (.albert_tf.lock, local and gs://), the held-locks list
    leftovers     what a killed earlier run left in its output (temporaries, checkpoint parts), removed under its lock
    signals       SIGTERM / SIGINT as a request to stop (StopSignal); the duration format of progress lines
    cluster       who is chief (one rule, from TF_CONFIG or a strategy)
    xla_flags     the XLA flags `import albert_tf` sets before anything compiles
    host_xla      whether XLA runs on this host (the TPU wheel has no XLA:CPU), and the override
    requirements  which TensorFlow is installed and what to install when it is missing
    faults        a full disk, an unanswering or refusing bucket: one line and its exit code
    watchdog      ends a run whose training makes no progress (--step-timeout)
    precision     the compute dtype (--dtype auto | float32 | bfloat16) and why it was chosen
    random_state  the global random generators, given back as a library call found them
    devices       the device table: accelerators' cores, memory and peak FLOP/s (plan, MFU, the keeper)
"""
