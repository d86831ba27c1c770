"""benchmarks/train_step.py --profile: `op_time` reads a real TensorFlow profile and counts every op kernel run by
its type, against a graph whose ops and run counts are known by construction."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks"))
import train_step  # noqa: E402  pylint: disable=wrong-import-position


def test_op_time_counts_each_kernel_run_by_op_type(tmp_path):
    import glob  # pylint: disable=import-outside-toplevel

    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    a = tf.random.stateless_normal([256, 256], seed=[1, 2])

    @tf.function
    def step(x):
        for _ in range(3):  # three matmuls, each followed by one elementwise op, and one transpose
            x = tf.nn.relu(tf.linalg.matmul(x, a))
        return tf.transpose(x)

    step(a).numpy()
    tf.profiler.experimental.start(str(tmp_path))
    for _ in range(4):
        step(a).numpy()
    tf.profiler.experimental.stop()
    (path,) = glob.glob(str(tmp_path / "plugins" / "profile" / "*" / "*.xplane.pb"))
    ops = train_step.op_time(path)
    matmuls = {op: value for op, value in ops.items() if op in train_step.MATMUL_OPS}
    assert sum(count for _, count in matmuls.values()) == 12, ops
    relu = {op: value for op, value in ops.items() if "Relu" in op}
    assert sum(count for _, count in relu.values()) == 12, ops
    transposes = {op: value for op, value in ops.items() if "Transpose" in op}
    assert sum(count for _, count in transposes.values()) == 4, ops
    assert all(seconds > 0 for seconds, _ in ops.values())
    # a 256³ matmul is 33.5 MFLOP: its time must be that of a real kernel, neither zero nor the whole run
    assert 1e-6 < sum(seconds for seconds, _ in matmuls.values()) / 12 < 1.0


def test_op_time_names_each_xla_kernel_by_its_function_inside_a_loop(tmp_path):
    """XLA launches are keyed by the Python function the launching node calls (called_functions over the graph's
    function library), also when they run inside a tf.while_loop body as in the benchmark's train loop; counts
    known by construction: per iteration one `double_it` and two `add_one`."""
    import glob  # pylint: disable=import-outside-toplevel

    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    @tf.function(jit_compile=True)
    def add_one(x):
        return x + 1.0

    @tf.function(jit_compile=True)
    def double(x):
        return x * 2.0

    @tf.function
    def loop(x, n):
        for _ in tf.range(n):
            x = add_one(add_one(double(x)))
        return x

    x = tf.ones([64, 64])
    loop(x, tf.constant(1)).numpy()
    tf.profiler.experimental.start(str(tmp_path))
    loop(x, tf.constant(5)).numpy()
    tf.profiler.experimental.stop()
    (path,) = glob.glob(str(tmp_path / "plugins" / "profile" / "*" / "*.xplane.pb"))
    graph = loop.get_concrete_function(x, tf.constant(5)).graph
    calls = train_step.called_functions(graph.as_graph_def())
    ops = train_step.op_time(path, calls)
    assert ops["XLA: add_one"][1] == 10 and ops["XLA: double"][1] == 5, ops
    assert "XLA kernels" not in ops, ops
    unnamed = train_step.op_time(path)  # without the call map: every launch under one key
    assert unnamed["XLA kernels"][1] == 15, unnamed


def test_recipe_and_set_make_the_model_the_workers_read(capsys):
    """--recipe cpu_small --set num_hidden_layers=4: the workers' albert_config.json is the recipe's model with that
    key changed (the sizes against the recipe's own), and the recipe's batch shapes; --set over --config alone; a
    bad --set is one line, not a worker's traceback."""
    import pytest  # pylint: disable=import-outside-toplevel

    from albert_tf.config import AlbertConfig  # pylint: disable=import-outside-toplevel
    from albert_tf.settings.pretrain_config import CPU_SMALL_MODEL  # pylint: disable=import-outside-toplevel

    args = train_step._parse_args(["--recipe", "cpu_small", "--set", "num_hidden_layers=4"])
    train_step._apply_model(args)
    model = AlbertConfig.from_json_file(args.config).to_dict()
    assert {k: model[k] for k in CPU_SMALL_MODEL} == {**CPU_SMALL_MODEL, "num_hidden_layers": 4}
    assert (args.seq_length, args.batch_size, args.max_predictions) == (64, 128, 10)
    args = train_step._parse_args(["--set", "num_hidden_layers=2"])  # over --config, albert_base by default
    train_step._apply_model(args)
    model = AlbertConfig.from_json_file(args.config)
    assert (model.num_hidden_layers, model.hidden_size, args.seq_length) == (2, 768, 128)
    with pytest.raises(SystemExit) as stop:
        train_step._apply_model(train_step._parse_args(["--recipe", "cpu_small", "--set", "num_layers=4"]))
    assert stop.value.code == 2
    assert capsys.readouterr().err.startswith("train_step: error: --set num_layers=...: 'num_layers' is not an")
