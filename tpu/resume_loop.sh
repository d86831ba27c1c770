#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Keeps a (Spot) pretraining run going until its final checkpoint exists, by polling: every --poll seconds a few
# short calls (is the final checkpoint there? is the TPU READY? is the run alive on worker 0?), no ssh held open.
# A TPU that is no longer READY (PREEMPTED, gone) is deleted and recreated as Spot capacity with albert_tf installed;
# a run that is not alive is launched again (tpu/launch_pretrain.sh, detached), which resumes from the latest
# checkpoint in the model dir. A run that exited 2 (bad flags or data) or 3 (non-finite loss) is not relaunched.
#
# Usage: tpu/resume_loop.sh --name NAME --zone ZONE --type TYPE --root gs://BUCKET/PATH --config CONFIG
#            [--recipe paper_v2] [--steps 125000] [--max-restarts 50] [--poll 300] [--wait 60] [--project P]
#            [--dry-run] [-- PRETRAIN FLAGS]
#   --steps         the run's last step: the loop ends when MODEL_DIR/ckpt-STEPS.index exists (passed to pretrain
#                   as --num-train-steps)
#   --max-restarts  give up after this many relaunches
#   --poll          seconds between checks
#   --wait          seconds before retrying a TPU that could not be recreated (no capacity)
#   --dry-run       print one pass of each branch: the checks, a relaunch on a READY TPU whose run stopped, and the
#                   recreation of a preempted one

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

NAME="" ZONE="" TYPE="" ROOT="" CONFIG="" RECIPE=paper_v2 STEPS=125000 MAX_RESTARTS=50 POLL=300 WAIT=60
parse_flags "name zone type root config recipe steps max-restarts poll wait --" "$@"
require --name "$NAME"
require --zone "$ZONE"
require --type "$TYPE"
require --root "$ROOT"
require --config "$CONFIG"
check_type "$TYPE"
check_gs --root "$ROOT"
check_config "$CONFIG"
[[ $STEPS =~ ^[1-9][0-9]*$ ]] || die "--steps $STEPS: expected a positive integer"
[[ $MAX_RESTARTS =~ ^[0-9]+$ ]] || die "--max-restarts $MAX_RESTARTS: expected a non-negative integer"
[[ $POLL =~ ^[0-9]+$ ]] || die "--poll $POLL: expected seconds"
ROOT=${ROOT%/}
MODEL_DIR=$ROOT/models/$(basename "${CONFIG%.json}")
FINAL=$MODEL_DIR/ckpt-$STEPS.index

common=(--name "$NAME" --zone "$ZONE")
if [[ -n $PROJECT ]]; then common+=(--project "$PROJECT"); fi
if [[ $DRY_RUN == 1 ]]; then common+=(--dry-run); fi
launch=("$HERE/launch_pretrain.sh" "${common[@]}" --type "$TYPE" --root "$ROOT" --config "$CONFIG"
        --recipe "$RECIPE" --model-dir "$MODEL_DIR" -- --num-train-steps "$STEPS" "${EXTRA[@]}")

finished() {
  gcloud_cmd storage ls "$FINAL" >/dev/null 2>&1
}

tpu_state() {
  gcloud_cmd compute tpus tpu-vm describe "$NAME" "--zone=$ZONE" "--format=value(state)" 2>/dev/null || echo MISSING
}

# The run on worker 0: "running PID", "stopped EXIT_CODE" or "never started" (tpu/on_worker.sh status); any other
# answer (no script yet, ssh failed) counts as not running: a launch while it runs is a no-op.
run_status() {
  gcloud_cmd compute tpus tpu-vm ssh "$NAME" "--zone=$ZONE" --worker=0 \
    --command "$(join_quoted bash "$WORKER_SCRIPT" status "$RUN_DIR")" 2>/dev/null || true
}

recreate() {
  "$HERE/delete_tpu.sh" "${common[@]}" || true
  "$HERE/create_tpu.sh" "${common[@]}" --type "$TYPE" --spot
}

if [[ $DRY_RUN == 1 ]]; then
  note "the loop: until $FINAL exists, every $POLL s, at most $MAX_RESTARTS relaunches"
  gcloud_cmd storage ls "$FINAL"
  gcloud_cmd compute tpus tpu-vm describe "$NAME" "--zone=$ZONE" "--format=value(state)"
  note "READY: is the run alive on worker 0?"
  run_status
  note "not running, and its exit code is not 2 or 3: launch it again (it resumes)"
  "${launch[@]}"
  note "not READY (PREEMPTED or gone): delete, recreate as Spot, install, launch"
  recreate
  "${launch[@]}"
  exit 0
fi

launches=0
relaunch() {
  if [[ $launches -gt $MAX_RESTARTS ]]; then die "gave up after $MAX_RESTARTS relaunches; $FINAL does not exist"; fi
  launches=$((launches + 1))
  "${launch[@]}" || note "the launch failed (exit $?); next check in $POLL s"
}

until finished; do
  state=$(tpu_state)
  if [[ $state != READY ]]; then
    note "TPU $NAME is $state: recreating it"
    if ! recreate; then note "could not recreate $NAME (no capacity?); retrying in $WAIT s"; sleep "$WAIT"; continue; fi
    relaunch
  else
    status=$(run_status)
    case $status in
      running*) ;;
      "stopped 2"|"stopped 3")
        die "pretrain on $NAME $status (bad flags or data, or a non-finite loss): not relaunched; see" \
            "$RUN_DIR/pretrain.log on worker 0" ;;
      *) note "run on $NAME: ${status:-no answer}: launching"; relaunch ;;
    esac
  fi
  sleep "$POLL"
done
note "done: $FINAL"
