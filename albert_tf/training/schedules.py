"""Learning-rate schedules, each lr(step) a pure function of the step (so a resumed run continues to the bit):

    polynomial   WarmupPolynomialDecay: the original optimization.py's linear warm-up, then polynomial decay (the
                 paper's; the default)
    linear       WarmupLinearToZero: linear warm-up to the peak, then a straight line from the peak to 0 at the last
                 step (Izsak et al. 2021: warm-up over 6 % of the budget, zero exactly at the budget)
    one-cycle    WarmupCosineToZero: linear warm-up, then a half cosine from the peak to 0 at the last step (the
                 one-cycle policy's annealing phase)
    wsd          WarmupStableDecay: linear warm-up, the peak held, then a linear decay to 0 that starts at
                 `decay_start` of the steps and lasts `decay_length` of them (warmup-stable-decay: a run can be
                 extended or cut before its decay starts without restarting)

`make_schedule(kind, ...)` builds one by its `pretrain --schedule` name (the names: settings.pretrain_config's
SCHEDULES).

A run whose length is learned after it starts (`pretrain --budget-hours`: the step count comes from the step rate
measured after compilation) builds its schedule with `deferred_total=True`: the total is then a float32 variable
read inside the compiled step, assigned once by `set_total(steps)` (no new trace, no recompile). Until then the
schedule must only be called within its warm-up, whose values do not depend on the total (every schedule here warms
up linearly from 0 to the peak over `num_warmup_steps`, whatever the total). The variable is the schedule's own,
not the optimizer's: checkpoints hold the same objects either way, and the run record holds the count.
"""
import keras
from keras import ops

from albert_tf.settings.pretrain_config import DECAY_LENGTH, DECAY_START, SCHEDULES


class _Schedule(keras.optimizers.schedules.LearningRateSchedule):
    """What every schedule here shares: `num_train_steps` (an int) and, with a deferred total, the variable that
    holds it in the compiled step."""

    total_variable = None

    def defer_total(self):
        """Holds the total in a float32 variable (created under the caller's strategy scope), assigned by
        set_total; the current total stands until then (the warm-up does not read it)."""
        self.total_variable = keras.Variable(float(self.num_train_steps), trainable=False,  # float32
                                             name="schedule_total")
        return self

    def set_total(self, num_train_steps):
        """The run's total, learned after it started: checked as the constructor checks it (ValueError), then
        assigned to the deferred variable."""
        type(self)(**{**self.get_config(), "num_train_steps": int(num_train_steps)})  # the constructor's checks
        self.num_train_steps = int(num_train_steps)
        self.total_variable.assign(float(num_train_steps))

    def total(self):
        """The total as the formulas read it: the deferred variable, else the number."""
        return float(self.num_train_steps) if self.total_variable is None else self.total_variable.value


@keras.saving.register_keras_serializable(package="albert_tf")
class WarmupPolynomialDecay(_Schedule):
    """lr(step) for step = the number of updates already applied (0 on the first update, as the original's
    global_step):

        decayed(step) = (peak − end) · (1 − min(step, num_train_steps) / num_train_steps) ** power + end
        lr(step)      = peak · (step − start_warmup_step) / num_warmup_steps   while step − start_warmup_step
                                                                                 < num_warmup_steps
                      = decayed(step)                                           afterwards

    As in the original, the warm-up ramps to the undecayed peak and then switches to the decayed value (which
    at step num_warmup_steps is already slightly below the peak), and the first update uses lr 0.

    Args:
      peak_learning_rate: the original's init_lr (ALBERT: 0.00176 at batch 4096).
      num_train_steps: the step at which the decay reaches `end_learning_rate`.
      num_warmup_steps: 0 disables the warm-up.
      power: the polynomial power (1.0: linear decay).
      end_learning_rate: the value reached at num_train_steps (0 in the original).
      start_warmup_step: the step at which the warm-up starts.
    """

    def __init__(self, peak_learning_rate, num_train_steps, num_warmup_steps=0, power=1.0, end_learning_rate=0.0,
                 start_warmup_step=0):
        if num_train_steps <= 0:
            raise ValueError(f"num_train_steps must be positive, got {num_train_steps}")
        if num_warmup_steps < 0:
            raise ValueError(f"num_warmup_steps must be >= 0, got {num_warmup_steps}")
        self.peak_learning_rate = float(peak_learning_rate)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)
        self.power = float(power)
        self.end_learning_rate = float(end_learning_rate)
        self.start_warmup_step = int(start_warmup_step)

    def __call__(self, step):
        step, total = ops.cast(step, "float32"), self.total()
        progress = ops.minimum(step, total) / total
        decayed = ((self.peak_learning_rate - self.end_learning_rate) * ops.power(1.0 - progress, self.power)
                   + self.end_learning_rate)
        if not self.num_warmup_steps:
            return decayed
        warm_step = step - float(self.start_warmup_step)
        warmup = self.peak_learning_rate * warm_step / float(self.num_warmup_steps)
        return ops.where(warm_step < float(self.num_warmup_steps), warmup, decayed)

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "num_train_steps": self.num_train_steps,
            "num_warmup_steps": self.num_warmup_steps,
            "power": self.power,
            "end_learning_rate": self.end_learning_rate,
            "start_warmup_step": self.start_warmup_step,
        }


class _WarmupThenDecay(_Schedule):
    """Linear warm-up from 0 to the peak over `num_warmup_steps` (step 0: lr 0), then `decay(step)`, reaching 0 at
    `num_train_steps` and staying there."""

    def __init__(self, peak_learning_rate, num_train_steps, num_warmup_steps=0):
        if num_train_steps <= 0:
            raise ValueError(f"num_train_steps must be positive, got {num_train_steps}")
        if not 0 <= num_warmup_steps < num_train_steps:
            raise ValueError(f"num_warmup_steps must be in [0, num_train_steps), got {num_warmup_steps}")
        self.peak_learning_rate = float(peak_learning_rate)
        self.num_train_steps = int(num_train_steps)
        self.num_warmup_steps = int(num_warmup_steps)

    def decay(self, step):
        """The learning rate after the warm-up (a float32 tensor of the step)."""
        raise NotImplementedError

    def __call__(self, step):
        step = ops.minimum(ops.cast(step, "float32"), self.total())
        after = self.decay(step)
        if not self.num_warmup_steps:
            return after
        warmup = self.peak_learning_rate * step / float(self.num_warmup_steps)
        return ops.where(step < float(self.num_warmup_steps), warmup, after)

    def decay_progress(self, step, start):
        """0 at step `start`, 1 at num_train_steps (clipped to [0, 1])."""
        return ops.clip((step - start) / ops.maximum(self.total() - start, 1.0), 0.0, 1.0)

    def get_config(self):
        return {"peak_learning_rate": self.peak_learning_rate, "num_train_steps": self.num_train_steps,
                "num_warmup_steps": self.num_warmup_steps}


@keras.saving.register_keras_serializable(package="albert_tf")
class WarmupLinearToZero(_WarmupThenDecay):
    """lr = peak · step / W during the warm-up (W = num_warmup_steps), then peak · (T − step) / (T − W): a straight
    line from the peak at W to 0 at T = num_train_steps."""

    def decay(self, step):
        return self.peak_learning_rate * (1.0 - self.decay_progress(step, float(self.num_warmup_steps)))


@keras.saving.register_keras_serializable(package="albert_tf")
class WarmupCosineToZero(_WarmupThenDecay):
    """lr = peak · step / W during the warm-up, then peak · (1 + cos(π · (step − W) / (T − W))) / 2: a half cosine
    from the peak at W to 0 at T."""

    def decay(self, step):
        progress = self.decay_progress(step, float(self.num_warmup_steps))
        return self.peak_learning_rate * 0.5 * (1.0 + ops.cos(3.141592653589793 * progress))


@keras.saving.register_keras_serializable(package="albert_tf")
class WarmupStableDecay(_WarmupThenDecay):
    """lr = peak · step / W during the warm-up, the peak until S = decay_start · T, then
    peak · (1 − (step − S) / (decay_length · T)) down to 0 at S + decay_length · T, and 0 after. decay_start ≥ W / T
    and decay_start + decay_length ≤ 1."""

    def __init__(self, peak_learning_rate, num_train_steps, num_warmup_steps=0, decay_start=DECAY_START,
                 decay_length=DECAY_LENGTH):
        super().__init__(peak_learning_rate, num_train_steps, num_warmup_steps)
        if not 0 < decay_length <= 1 or not 0 <= decay_start <= 1 - decay_length + 1e-9:
            raise ValueError(f"decay_start {decay_start} and decay_length {decay_length}: expected fractions of the "
                             "steps with 0 < decay_length and decay_start + decay_length <= 1")
        if decay_start * num_train_steps < num_warmup_steps:
            raise ValueError(f"decay_start {decay_start} is step {decay_start * num_train_steps:g}, inside the "
                             f"warm-up of {num_warmup_steps} steps")
        self.decay_start = float(decay_start)
        self.decay_length = float(decay_length)

    def decay(self, step):
        start, length = self.decay_start * self.total(), self.decay_length * self.total()
        return self.peak_learning_rate * (1.0 - ops.clip((step - start) / length, 0.0, 1.0))

    def get_config(self):
        return {**super().get_config(), "decay_start": self.decay_start, "decay_length": self.decay_length}


def make_schedule(kind, peak_learning_rate, num_train_steps, num_warmup_steps=0, poly_power=1.0,
                  decay_start=DECAY_START, decay_length=DECAY_LENGTH, deferred_total=False):
    """The schedule named `kind` (one of SCHEDULES); `poly_power` is polynomial's, `decay_start` and
    `decay_length` (fractions of num_train_steps) wsd's; `deferred_total`: the total in a variable, assigned later
    by set_total (num_train_steps stands until then)."""
    if kind == "polynomial":
        schedule = WarmupPolynomialDecay(peak_learning_rate, num_train_steps, num_warmup_steps, power=poly_power)
    elif kind == "wsd":
        schedule = WarmupStableDecay(peak_learning_rate, num_train_steps, num_warmup_steps, decay_start,
                                     decay_length)
    elif kind in ("linear", "one-cycle"):
        schedule = {"linear": WarmupLinearToZero, "one-cycle": WarmupCosineToZero}[kind](
            peak_learning_rate, num_train_steps, num_warmup_steps)
    else:
        raise ValueError(f"schedule {kind!r}: expected one of {', '.join(SCHEDULES)}")
    return schedule.defer_total() if deferred_total else schedule
