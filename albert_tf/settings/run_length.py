"""A pretraining run's length and its sequence-length phases, as arithmetic on numbers (no TensorFlow): what
`pretrain --budget-tokens`, `--phases` and `albert-tf plan` share.

    --phases 128:0.9,512:0.1         SEQ:FRACTION[:BATCH],...: each phase trains FRACTION of the steps at sequence
                                     length SEQ (and global batch BATCH; default --batch-size), in the order given
    --phases 64:0.25:32,64:0.25:64,64:0.5
                                     a batch-size ramp: a length again with another batch (repeat_index: the data
                                     order of each repeat is drawn anew)
    phase_bounds(phases, steps)      [(first step, end step)] of each phase: the switch to phase i+1 is at step
                                     round(F × steps), F the fractions of phases 0..i summed, rounded half up
    tokens_of(phases, steps)         the tokens a run of `steps` steps trains on (batch × seq summed over its steps)
    steps_for_tokens(phases, T)      the fewest steps whose tokens reach T (without phases: ceil(T / (batch × seq)))
    steps_for_hours(H, seconds)      the steps H hours of steps buy at `seconds` per step (pretrain: measured; plan:
                                     estimated)

A run without --phases is one phase: (max_seq_length, 1.0, batch_size).
"""
import dataclasses
import math


@dataclasses.dataclass(frozen=True)
class Phase:
    """One sequence-length phase: `seq_length` tokens per example, `fraction` of the run's steps, `batch_size`
    examples per step (None: the run's --batch-size)."""
    seq_length: int
    fraction: float
    batch_size: int | None = None


def parse_phases(text, flag="--phases"):
    """"128:0.9,512:0.1[:BATCH]" → [Phase]; one-line ValueError naming `flag` for text of another form, a length or
    batch that is not a positive integer, a fraction outside (0, 1], fractions that do not sum to 1, a length given
    twice."""
    phases = []
    for part in text.split(","):
        fields = part.strip().split(":")
        try:
            if len(fields) not in (2, 3):
                raise ValueError
            seq, fraction = int(fields[0]), float(fields[1])
            batch = int(fields[2]) if len(fields) == 3 else None
        except ValueError:
            raise ValueError(f"{flag} {text!r}: expected SEQ:FRACTION[:BATCH],... (e.g. 128:0.9,512:0.1), got "
                             f"{part.strip()!r}") from None
        if seq < 1 or (batch is not None and batch < 1) or not 0 < fraction <= 1:
            raise ValueError(f"{flag} {text!r}: {part.strip()!r} needs a positive length and batch and a fraction "
                             "in (0, 1]")
        phases.append(Phase(seq, fraction, batch))
    if abs(sum(p.fraction for p in phases) - 1.0) > 1e-6:
        raise ValueError(f"{flag} {text!r}: the fractions sum to {sum(p.fraction for p in phases):g}, not 1")
    if repeated_shape(phases):
        raise ValueError(f"{flag} {text!r}: a sequence length is given twice with the same batch; give a length "
                         "again only with another batch (a batch-size ramp)")
    return phases


def repeated_shape(phases):
    """The smallest (seq_length, batch_size) that two of `phases` share (a batch of None, the run's, first), or
    None."""
    shapes = [(p.seq_length, p.batch_size) for p in phases]
    return min((shape for shape in shapes if shapes.count(shape) > 1), default=None,
               key=lambda shape: (shape[0], shape[1] or 0))


def check_run_batches(phases, flag="--phases"):
    """Refuses run phases (run_phases: each with its batch) in which a length comes twice with the same batch (a
    BATCH equal to --batch-size given beside a phase without one)."""
    twice = repeated_shape(phases)
    if twice:
        raise ValueError(f"{flag}: sequence length {twice[0]} comes twice with global batch {twice[1]} (a phase "
                         "without BATCH has --batch-size); give a length again only with another batch")


def repeat_index(phases, index):
    """How many phases before phases[index] have its sequence length (0 for its first): a repeat reads the same
    records, and pretrain draws its data order with the seed + this count, so it does not re-read the earlier
    phase's examples in their order."""
    return sum(p.seq_length == phases[index].seq_length for p in phases[:index])


def round_half_up(value):
    """round(value) with halves rounded up (Python's round() rounds them to even)."""
    return int(math.floor(value + 0.5))


def phase_bounds(phases, steps):
    """[(first step, end step)] of each of `phases` in a run of `steps` steps: phase i trains the steps first..end-1
    (0-based counts of updates already applied); the switch to phase i+1 is at round(F × steps) (F the fractions of
    phases 0..i), the last phase ends at `steps`. A phase may get no step in a very short run."""
    bounds, total, start = [], 0.0, 0
    for index, phase in enumerate(phases):
        total += phase.fraction
        end = steps if index == len(phases) - 1 else min(steps, round_half_up(total * steps))
        bounds.append((start, max(start, end)))
        start = max(start, end)
    return bounds


def tokens_of(phases, steps, batch_size):
    """The tokens a run of `steps` steps trains on: Σ over phases of its steps × its batch × its length
    (`batch_size`: the run's --batch-size, for phases without their own)."""
    return sum((end - start) * (phase.batch_size or batch_size) * phase.seq_length
               for phase, (start, end) in zip(phases, phase_bounds(phases, steps)))


def steps_for_tokens(phases, tokens, batch_size):
    """The fewest steps whose tokens (tokens_of) reach `tokens`: with one phase ceil(tokens / (batch × seq))."""
    per_step = sum(p.fraction * (p.batch_size or batch_size) * p.seq_length for p in phases)
    steps = max(1, math.ceil(tokens / per_step))
    while steps > 1 and tokens_of(phases, steps - 1, batch_size) >= tokens:
        steps -= 1
    while tokens_of(phases, steps, batch_size) < tokens:
        steps += 1
    return steps


def steps_for_hours(hours, seconds_per_step):
    """The steps `hours` of training steps buy at `seconds_per_step`: floor(hours × 3600 / seconds_per_step)
    (start-up, compilation, saves and evaluations not counted)."""
    return int(hours * 3600.0 / seconds_per_step)


def phases_or_one(phases_text, seq_length):
    """The run's phases: parse_phases(`phases_text`), or without --phases one phase of `seq_length` for all steps."""
    return parse_phases(phases_text) if phases_text else [Phase(seq_length, 1.0)]


def run_phases(phases_text, seq_length, batch_size):
    """The run's phases, each with its batch: phases_or_one, a phase without its own batch given `batch_size`."""
    return [dataclasses.replace(p, batch_size=p.batch_size or batch_size)
            for p in phases_or_one(phases_text, seq_length)]


__all__ = ["Phase", "parse_phases", "phase_bounds", "tokens_of", "steps_for_tokens", "steps_for_hours",
           "phases_or_one", "run_phases", "round_half_up", "check_run_batches", "repeat_index"]
