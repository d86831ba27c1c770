#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Keeps a (Spot) pretraining run going until its final checkpoint exists: after each launch it checks the TPU; one
# that is no longer READY (preempted, deleted) is deleted and recreated as Spot capacity with albert_tf installed,
# then the same launch command runs again, which resumes from the latest checkpoint in the model dir.
#
# Usage: tpu/resume_loop.sh --name NAME --zone ZONE --type TYPE --root gs://BUCKET/PATH --config CONFIG
#            [--recipe paper_v2] [--steps 125000] [--max-restarts 50] [--wait 60] [--project P] [--dry-run]
#            [-- PRETRAIN FLAGS]
#   --steps         the run's last step: the loop ends when MODEL_DIR/ckpt-STEPS.index exists (passed to pretrain
#                   as --num-train-steps)
#   --max-restarts  give up after this many relaunches
#   --dry-run       print one pass of the loop, as when the slice was preempted: check, describe, delete,
#                   create + install, launch

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

NAME="" ZONE="" TYPE="" ROOT="" CONFIG="" RECIPE=paper_v2 STEPS=125000 MAX_RESTARTS=50 WAIT=60
parse_flags "name zone type root config recipe steps max-restarts wait --" "$@"
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

recreate() {
  "$HERE/delete_tpu.sh" "${common[@]}" || true
  "$HERE/create_tpu.sh" "${common[@]}" --type "$TYPE" --spot
}

if [[ $DRY_RUN == 1 ]]; then
  note "the loop: until $FINAL exists, at most $MAX_RESTARTS relaunches, $WAIT s apart"
  gcloud_cmd storage ls "$FINAL"
  gcloud_cmd compute tpus tpu-vm describe "$NAME" "--zone=$ZONE" "--format=value(state)"
  note "state not READY (preempted or gone): delete, recreate as Spot, install"
  recreate
  "${launch[@]}"
  exit 0
fi

launches=0
until finished; do
  if [[ $launches -gt $MAX_RESTARTS ]]; then die "gave up after $MAX_RESTARTS relaunches; $FINAL does not exist"; fi
  launches=$((launches + 1))
  state=$(tpu_state)
  if [[ $state != READY ]]; then
    note "TPU $NAME is $state: recreating it"
    recreate || { note "could not recreate $NAME (no capacity?); retrying in $WAIT s"; sleep "$WAIT"; continue; }
  fi
  "${launch[@]}" || { note "pretrain stopped (exit $?); relaunching in $WAIT s"; sleep "$WAIT"; }
done
note "done: $FINAL"
