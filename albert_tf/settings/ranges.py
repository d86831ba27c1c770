"""The range checks of the configs' constructors: a value outside its range is refused with one line that names the
field's flag (`run_config.flag_of`), as the command line prints it. No TensorFlow.

    check_range(config, names, ok, expected)   "--batch-size must be positive, got 0"
"""
from albert_tf import run_config

POSITIVE = (lambda value: value > 0, "positive")
FRACTION = (lambda value: 0 <= value < 1, "in [0, 1)")


def flag(config, name):
    """The flag of the field `name` of run config `config` (a class or an instance): `batch_size` → --batch-size."""
    return run_config.flag_of(next(f for f in run_config.fields_of(config) if f.name == name))


def check_range(config, names, ok, expected):
    """Refuses the first of the fields `names` of `config` whose value is set (not None) and not `ok(value)`:
    ValueError "FLAG must be EXPECTED, got VALUE"."""
    for name in names:
        value = getattr(config, name)
        if value is not None and not ok(value):
            raise ValueError(f"{flag(config, name)} must be {expected}, got {value}")


__all__ = ["check_range", "flag", "POSITIVE", "FRACTION"]
