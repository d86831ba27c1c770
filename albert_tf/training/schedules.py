"""The pretraining learning-rate schedule of the original optimization.py: linear warm-up, then polynomial decay."""
import keras
from keras import ops


@keras.saving.register_keras_serializable(package="albert_tf")
class WarmupPolynomialDecay(keras.optimizers.schedules.LearningRateSchedule):
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
        step = ops.cast(step, "float32")
        progress = ops.minimum(step, float(self.num_train_steps)) / float(self.num_train_steps)
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
