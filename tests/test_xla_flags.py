"""`import albert_tf` turns XLA:CPU's YNNPACK fusions off (they crash when one kernel runs on two threads at once;
see albert_tf/runtime/xla_flags.py): the flag's bookkeeping, and the compiled kernels of a fresh process."""
import glob
import os

import pytest

import helpers
from albert_tf.runtime import requirements, xla_flags

pytestmark = pytest.mark.tpu_stack  # also run on the TPU wheel and the oldest TensorFlow (.ci/run)


TF_VERSION = xla_flags.tensorflow_version()
NO_YNN = "TensorFlow 2.20 has no YNNPACK fusions to turn off"


def test_flag_is_appended_to_existing_flags():
    env = {"XLA_FLAGS": "--xla_dump_to=/tmp/x"}
    assert xla_flags.disable_ynn_fusions(env, version=(2, 21))
    assert env["XLA_FLAGS"] == "--xla_dump_to=/tmp/x --xla_cpu_experimental_ynn_fusion_type="
    assert not xla_flags.disable_ynn_fusions(env, version=(2, 21))  # once only
    assert env["XLA_FLAGS"].count("ynn") == 1


def test_flag_is_set_on_an_empty_environment():
    env = {}
    assert xla_flags.disable_ynn_fusions(env, version=(2, 21))
    assert env == {"XLA_FLAGS": "--xla_cpu_experimental_ynn_fusion_type="}


def test_users_own_setting_is_kept():
    env = {"XLA_FLAGS": "--xla_cpu_experimental_ynn_fusion_type=reduce"}
    assert not xla_flags.disable_ynn_fusions(env, version=(2, 21))
    assert env == {"XLA_FLAGS": "--xla_cpu_experimental_ynn_fusion_type=reduce"}


def test_tensorflow_2_20_gets_nothing():
    """TF 2.20's XLA has no such flag, and aborts on a flag it does not know."""
    env = {"XLA_FLAGS": "--xla_dump_to=/tmp/x"}
    assert not xla_flags.disable_ynn_fusions(env, version=(2, 20))
    assert not xla_flags.disable_ynn_fusions({}, version=None)  # no TensorFlow found
    assert env == {"XLA_FLAGS": "--xla_dump_to=/tmp/x"}


@pytest.mark.skipif(TF_VERSION is None or TF_VERSION < (2, 21), reason=NO_YNN)
def test_this_process_has_it():
    assert "--xla_cpu_experimental_ynn_fusion_type=" in os.environ["XLA_FLAGS"].split()


def _compiled_ynn_fusions(tmp_path, xla_flags):
    dump = tmp_path / "dump"
    # the fused masked softmax, forward and backward, at a size where XLA:CPU 2.21 picks YNNPACK for reductions
    proc = helpers.run_program("fused_softmax_probe", timeout=300,
                               env={"XLA_FLAGS": f"--xla_dump_to={dump} {xla_flags}".strip()})
    assert proc.returncode == 0, proc.stderr[-3000:]
    modules = glob.glob(str(dump / "*after_optimizations.txt"))
    assert modules, f"XLA dumped no compiled modules under {dump}"
    return sum(open(m, encoding="utf-8").read().count("__ynn_fusion") for m in modules)


@pytest.mark.skipif(TF_VERSION is None or TF_VERSION < (2, 21), reason=NO_YNN)
def test_compiled_kernels_have_no_ynn_fusion(tmp_path):
    # the control: with the user's own setting kept, the same kernels get YNNPACK reductions (on the x86 CPUs seen
    # here and in CI; where XLA picks none there is nothing to turn off, and nothing for this test to tell)
    if _compiled_ynn_fusions(tmp_path / "user", "--xla_cpu_experimental_ynn_fusion_type=reduce") == 0:
        pytest.skip("XLA:CPU compiles no YNNPACK fusion on this CPU even when asked to")
    assert _compiled_ynn_fusions(tmp_path / "default", "") == 0


@pytest.mark.parametrize("version, want", [("2.21.0", (2, 21)), ("2.22.0.dev20251120", (2, 22)),
                                           ("2.21.0rc1", (2, 21)), ("unknown", None)])
def test_tensorflow_version_reads_major_and_minor(monkeypatch, version, want):
    monkeypatch.setattr(requirements.importlib.metadata, "version", lambda name: version)
    assert xla_flags.tensorflow_version() == want
