"""A whole run's costs on a slice, over its sequence-length phases: steps, tokens, hours, chip-hours and money (what
`albert-tf plan` adds to one step's estimate, training/costs.py). No TensorFlow.

    phases      each phase (settings/run_length.py: its length, batch and share of the steps) is estimated alone with
                costs.estimate: its memory per device, its step time at the run's MFU, its steps and hours
    the flags   the phase that needs the most memory per device is the run's estimate: what fits it (--remat,
                --gradient-accumulation-steps) is applied to every phase, and the phases' times are taken with it
    steps       --num-train-steps; --budget-tokens: run_length.steps_for_tokens (as pretrain decides it);
                --budget-hours: run_length.steps_for_hours at the estimated step time (pretrain measures it instead)
    chip-hours  the slice's chips (the device table: TensorFlow devices ÷ devices per chip) × the hours
    cost        chip-hours × --price-per-chip-hour

Every time here is an estimate: FLOPs ÷ (MFU × the table's peak), the MFU an assumption (--mfu), not a measurement.
"""
from albert_tf.runtime.devices import CPU_TOPOLOGY, parse_topology
from albert_tf.settings.run_length import phase_bounds, steps_for_hours, tokens_of
from albert_tf.training import costs


def chips_of(topology):
    """The chips of a TPU slice (v3-8 → 4, v5litepod-16 → 16, v4-128 → 64); None for the CPU or no topology."""
    if not topology or topology == CPU_TOPOLOGY:
        return None
    return parse_topology(topology).chips


def chip_hours(topology, seconds):
    """Chip-hours of `seconds` on the slice `topology`: chips × hours (None without chips or time)."""
    chips = chips_of(topology)
    return None if chips is None or seconds is None else chips * seconds / 3600.0


def _fit_flags(plan):
    """(remat, accumulation steps) the run takes from its largest phase's estimate: the recommended option's when it
    keeps the global batch, else the estimate's own."""
    option = plan["recommended"]
    if option is not None and option["keeps_global_batch"]:
        return bool(option["flags"].get("--remat")), option["flags"].get("--gradient-accumulation-steps", 1)
    return plan["remat"], plan["accumulation_steps"]


def estimate_run(phases, estimate_phase, steps=None, hours=None, price=None):
    """The run's plan: costs.estimate's dict of its phase with the most memory per device, with the run's figures.

    Args:
      phases: [run_length.Phase], each with its batch. estimate_phase(phase, remat, accumulation_steps, steps):
        costs.estimate of one phase (the model and the slice fixed by the caller; None: the run's flags).
      steps: the run's steps. hours: --budget-hours (one phase): the steps decided at the estimated step time.
      price: the price of a chip-hour (None: no cost).
    Returns:
      the dict (with phases, its `steps` and `total_time_s` None), with `phases` (per phase: seq_length, fraction,
      batch_size, first_step, steps, tokens, hbm_per_core_bytes, fits, step_time_s, time_s), `largest_phase` (its
      index), the run's `run_steps`, `tokens`, `run_time_s`, `budget_hours`, `chips`, `chip_hours`,
      `price_per_chip_hour` and `cost` (None where a figure is unknown).
    """
    given = [estimate_phase(p, None, None, None) for p in phases]
    largest = max(range(len(phases)), key=lambda i: given[i]["hbm_per_core_bytes"])
    remat, accumulation = _fit_flags(given[largest])
    flagged = [estimate_phase(p, remat, accumulation, None) for p in phases]
    if hours is not None:
        if flagged[0]["step_time_s"] is None:
            raise ValueError("--budget-hours: no step time to turn hours into steps (the topology's peak is unknown)")
        steps = steps_for_hours(hours, flagged[0]["step_time_s"])
    rows, total = [], 0.0 if flagged[0]["step_time_s"] is not None else None
    for phase, row, (first, end) in zip(phases, flagged, phase_bounds(phases, steps)):
        time = None if total is None else row["step_time_s"] * (end - first)
        total = None if total is None else total + time
        rows.append({"seq_length": phase.seq_length, "fraction": phase.fraction, "batch_size": phase.batch_size,
                     "first_step": first, "steps": end - first, "tokens": (end - first) * phase.batch_size
                     * phase.seq_length, "hbm_per_core_bytes": row["hbm_per_core_bytes"], "fits": row["fits"],
                     "step_time_s": row["step_time_s"], "time_s": time})
    # (with phases, the estimate of the largest has no total: the phases' lines give each one's)
    plan = estimate_phase(phases[largest], None, None, steps if len(phases) == 1 else None)
    plan.update({"phases": rows, "largest_phase": largest, "run_steps": steps,
                 "tokens": tokens_of(phases, steps, phases[0].batch_size), "run_time_s": total,
                 "budget_hours": hours})
    return priced(plan, price)


def priced(plan, price):
    """`plan` with its chips, chip-hours (over the run's time) and cost at `price` per chip-hour (None: no cost)."""
    hours = chip_hours(plan["topology"], plan["run_time_s"])
    plan.update({"chips": chips_of(plan["topology"]), "chip_hours": hours, "price_per_chip_hour": price,
                 "cost": None if price is None or hours is None else hours * price})
    return plan


def phases_text(plan):
    """"128 x 4096 for 90 %, 512 x 4096 for 10 %" (seq x batch per share of the steps) or "512 x 4096"."""
    rows = plan["phases"]
    if len(rows) == 1:
        return f"{rows[0]['seq_length']} x {rows[0]['batch_size']}"
    return ", ".join(f"{r['seq_length']} x {r['batch_size']} for {r['fraction']:.0%}" for r in rows)


def _money(value):
    return "-" if value is None else f"{value:,.2f}"


def run_lines(plan):
    """The run's lines of the plan's text: its phases (when more than one), its steps, tokens, hours, chip-hours and
    cost."""
    lines = [""]
    rows = plan["phases"]
    if len(rows) > 1:
        largest = rows[plan["largest_phase"]]
        lines.append(f"phases (the flags fit the phase at seq {largest['seq_length']}, batch {largest['batch_size']}, "
                     f"the most memory per {plan['device']}; its estimate is the one above):")
        for r in rows:
            fits = "" if r["fits"] is None else (", fits" if r["fits"] else ", DOES NOT FIT")
            lines.append(f"  seq {r['seq_length']:>5} batch {r['batch_size']:>6}: steps {r['first_step'] + 1:,}.."
                         f"{r['first_step'] + r['steps']:,} ({r['steps']:,}), {costs.count_text(r['tokens'])} tokens, "
                         f"{r['hbm_per_core_bytes'] / costs.GIB:.2f} GiB per {plan['device']}{fits}"
                         + ("" if r["time_s"] is None else f", {costs.total_text(r['time_s'])}"))
    run = (f"run: {plan['run_steps']:,} steps, {costs.count_text(plan['tokens'])} tokens ({plan['tokens']:,})"
           + ("" if plan["run_time_s"] is None else f", {costs.total_text(plan['run_time_s'])} (estimated)"))
    if plan["budget_hours"] is not None:
        run += (f"; --budget-hours {plan['budget_hours']:g} at the estimated step time (pretrain decides the count "
                "from the step time it measures)")
    lines.append(run)
    if plan["chip_hours"] is not None:
        line = f"  {plan['chips']:,} chips x {plan['run_time_s'] / 3600:,.1f} h = {plan['chip_hours']:,.1f} chip-hours"
        if plan["cost"] is not None:
            line += f"; at {plan['price_per_chip_hour']:g} per chip-hour: cost {_money(plan['cost'])}"
        lines.append(line)
    return lines


COMPARE_HEADER = ("run", "steps", "tokens", "seq x batch", "hours", "chip-hours", "cost")


def compare_row(name, plan):
    """One run's figures for the side-by-side table (and the JSON's `compare`)."""
    return {"recipe": name, "steps": plan["run_steps"], "tokens": plan["tokens"], "phases": phases_text(plan),
            "hours": None if plan["run_time_s"] is None else plan["run_time_s"] / 3600,
            "chip_hours": plan["chip_hours"], "cost": plan["cost"], "fits": plan["fits"],
            "recommended_flags": None if plan["recommended"] is None else costs.pretrain_flags(plan["recommended"])}


def compare_lines(rows):
    """The side-by-side table of compare_row's rows."""
    cells = [COMPARE_HEADER] + [
        (r["recipe"] or "(flags)", f"{r['steps']:,}", costs.count_text(r["tokens"]), r["phases"],
         "-" if r["hours"] is None else f"{r['hours']:,.1f}",
         "-" if r["chip_hours"] is None else f"{r['chip_hours']:,.0f}", _money(r["cost"])) for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(COMPARE_HEADER))]
    return ["", "side by side (times and costs are estimates at the assumed MFU):"] + [
        "  " + "  ".join(c.ljust(w) if i in (0, 3) else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
        for row in cells]


__all__ = ["chips_of", "chip_hours", "estimate_run", "priced", "run_lines", "compare_row", "compare_lines",
           "phases_text"]
