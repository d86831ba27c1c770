#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# The keeper: keeps a pretraining run going on a Cloud TPU until its schedule is done, by polling from this machine
# (no ssh held open). Every --poll seconds: is the final checkpoint there? what state is the slice in? is the run
# alive on worker 0, and did it make progress? It deletes and recreates only a slice that is lost (PREEMPTED,
# TERMINATED, or NOT_FOUND twice in a row), with the slice's own accelerator type, runtime version and capacity
# (spot, preemptible, reserved, on-demand) as recorded when the keeper first saw it, and only a slice that it created
# itself or that --allow-replace lets it replace. A failed `describe` is an unknown state: nothing is touched.
# CREATING, STARTING, RESTARTING, REPAIRING and STOPPING are waited for, up to --settle-timeout. The run's exit code
# says what comes next (tpu/README.md, "Exit codes" and "The keeper"); a run that stops making progress (no newer
# metrics.jsonl row or checkpoint for --hang-factor x --save-checkpoints-secs while the slice is READY) is stopped
# (SIGTERM, then SIGKILL) and relaunched. Every launch passes the keeper's run id (ALBERT_TF_RUN_ID), so that a
# relaunch takes over the output lock that a hard-killed run of this job left behind.
#
# Usage: tpu/keep_alive.sh --name NAME --zone ZONE --root gs://BUCKET/PATH --config CONFIG [--type TYPE]
#            [--image VERSION] [--spot | --preemptible | --reserved] [--allow-replace] [--recipe paper_v2]
#            [--model-dir gs://...] [--steps 125000] [--hang-factor 3] [--kill-after 120] [--poll 300]
#            [--retries 3] [--retry-wait 10] [--settle-timeout 3600] [--wait 60] [--max-restarts 10]
#            [--state-file PATH] [--project P] [--dry-run] [-- PRETRAIN FLAGS]
#   --type, --image, --spot, --preemptible, --reserved
#                      for a slice that does not exist yet: the keeper creates it (as tpu/create_tpu.sh does, no
#                      flag: on-demand). An existing slice's own values are read from `describe` and recorded.
#   --allow-replace    the keeper may delete and recreate a lost slice that it did not create
#   --steps            the run's last step: done when MODEL_DIR/ckpt-STEPS.index exists or the run exits 0 (passed
#                      to pretrain as --num-train-steps)
#   --hang-factor      the progress watchdog: a run with no newer metrics row or checkpoint for this many times
#                      pretrain's --save-checkpoints-secs (600 unless given after --) is stopped and relaunched
#                      (0: no watchdog)
#   --kill-after       seconds between the watchdog's SIGTERM and its SIGKILL
#   --poll             seconds between checks
#   --retries          `describe` calls per check before the state counts as unknown (--retry-wait s apart)
#   --settle-timeout   seconds a slice may stay in a transitional or unknown state; then the keeper stops and says so
#   --wait             seconds before trying again to create a slice that could not be created (no capacity)
#   --max-restarts     give up after this many relaunches in a row with no progress in the model dir
#   --state-file       what the keeper records: the slice's type, runtime version and capacity, whether it created
#                      the slice, the run id (default ~/.albert_tf/keeper/PROJECT.ZONE.NAME)
#   --dry-run          print the commands of each branch once: the checks, a relaunch, the watchdog's stop and a
#                      recreation
#   Exit status: 0 done; 1 stopped, the reason in one line (a run that must not be relaunched, a lost slice it may
#   not replace, a state that did not settle, no progress); 2 bad flags. Ctrl-C stops the keeper, not the run.

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

NAME="" ZONE="" TYPE="" IMAGE="" SPOT=0 PREEMPTIBLE=0 RESERVED=0 ALLOW_REPLACE=0 ROOT="" CONFIG="" RECIPE=paper_v2
MODEL_DIR="" STEPS=125000 HANG_FACTOR=3 KILL_AFTER=120 POLL=300 RETRIES=3 RETRY_WAIT=10 SETTLE_TIMEOUT=3600 WAIT=60
MAX_RESTARTS=10 STATE_FILE=""
parse_flags "name zone type image spot! preemptible! reserved! allow-replace! root config recipe model-dir steps
  hang-factor kill-after poll retries retry-wait settle-timeout wait max-restarts state-file --" "$@"
require --name "$NAME"
require --zone "$ZONE"
require --root "$ROOT"
require --config "$CONFIG"
if [[ -n $TYPE ]]; then check_type "$TYPE"; fi
check_gs --root "$ROOT"
check_config "$CONFIG"
for flag in steps retries; do check_number "--$flag" "$(flag_value "$flag")" positive; done
for flag in hang-factor settle-timeout max-restarts; do check_number "--$flag" "$(flag_value "$flag")" integer; done
for flag in poll retry-wait wait; do check_number "--$flag" "$(flag_value "$flag")" seconds; done
[[ $KILL_AFTER =~ ^[0-9]+(\.[0-9])?$ ]] || die "--kill-after $KILL_AFTER: expected seconds (one decimal at most)"
[[ $((SPOT + PREEMPTIBLE + RESERVED)) -le 1 ]] || die "--spot, --preemptible and --reserved: one at most"
ROOT=${ROOT%/}
MODEL_DIR=${MODEL_DIR:-$ROOT/models/$(basename "${CONFIG%.json}")}
check_gs --model-dir "$MODEL_DIR"
FINAL=$MODEL_DIR/ckpt-$STEPS.index
SAVE_SECS=$(save_interval "${EXTRA[@]}")
STATE_FILE=${STATE_FILE:-$HOME/.albert_tf/keeper/${PROJECT:-default}.$ZONE.$NAME}
common=(--name "$NAME" --zone "$ZONE")
if [[ -n $PROJECT ]]; then common+=(--project "$PROJECT"); fi
if [[ $DRY_RUN == 1 ]]; then common+=(--dry-run); fi
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# ---------------------------------------------------------------------------------------------- what is recorded
# S_TYPE S_VERSION S_CAPACITY: the slice; S_CREATED: 1 when this keeper created it; S_RUN_ID, S_MODEL_DIR: the run.
S_TYPE="" S_VERSION="" S_CAPACITY="" S_CREATED=0 S_RUN_ID="" S_MODEL_DIR=""

load_state() {
  local key value
  [[ -e $STATE_FILE ]] || return 0
  while IFS='=' read -r key value; do
    case $key in
      accelerator_type) S_TYPE=$value ;;
      runtime_version) S_VERSION=$value ;;
      capacity) S_CAPACITY=$value ;;
      created_by_keeper) S_CREATED=$value ;;
      run_id) S_RUN_ID=$value ;;
      model_dir) S_MODEL_DIR=$value ;;
    esac
  done < "$STATE_FILE"
}

save_state() {
  if [[ $DRY_RUN == 1 ]]; then return; fi
  mkdir -p "$(dirname "$STATE_FILE")"
  printf '%s\n' "accelerator_type=$S_TYPE" "runtime_version=$S_VERSION" "capacity=$S_CAPACITY" \
    "created_by_keeper=$S_CREATED" "run_id=$S_RUN_ID" "model_dir=$S_MODEL_DIR" > "$STATE_FILE.tmp"
  mv -f "$STATE_FILE.tmp" "$STATE_FILE"
}

# ---------------------------------------------------------------------------------------------- the slice
DESCRIBE_FORMAT="csv[no-heading](state,acceleratorType,runtimeVersion,schedulingConfig.spot,"
DESCRIBE_FORMAT+="schedulingConfig.preemptible,schedulingConfig.reserved)"

# One `describe`: STATE (and the slice's values in D_TYPE, D_VERSION, D_CAPACITY), NOT_FOUND (the API said so), or
# UNKNOWN (any other failure: its last line in LAST_ERROR).
describe_once() {
  local out rc=0 spot preemptible reserved
  out=$(gcloud_cmd compute tpus tpu-vm describe "$NAME" "--zone=$ZONE" "--format=$DESCRIBE_FORMAT" 2> "$TMP/err") ||
    rc=$?
  if [[ $rc == 0 && -n $out ]]; then
    IFS=, read -r STATE D_TYPE D_VERSION spot preemptible reserved <<< "$out"
    D_CAPACITY=on-demand
    if [[ ${spot,,} == true ]]; then D_CAPACITY=spot; fi
    if [[ ${preemptible,,} == true ]]; then D_CAPACITY=preemptible; fi
    if [[ ${reserved,,} == true ]]; then D_CAPACITY=reserved; fi
    if [[ -z $STATE ]]; then STATE=UNKNOWN LAST_ERROR="describe gave no state: $out"; fi
  elif [[ $rc != 0 ]] && grep -q NOT_FOUND "$TMP/err"; then
    STATE=NOT_FOUND
  else
    STATE=UNKNOWN
    LAST_ERROR=$(grep . "$TMP/err" | tail -n 1 || true)
    LAST_ERROR=${LAST_ERROR:-describe printed nothing}
  fi
}

# The slice's state, asking up to --retries times while the answer is UNKNOWN.
poll_state() {
  local attempt
  for attempt in $(seq "$RETRIES"); do
    describe_once
    [[ $STATE == UNKNOWN && $attempt -lt $RETRIES ]] || return 0
    nap "$RETRY_WAIT"
  done
}

# The first look: record the slice's values (or create it when it does not exist) and the run id.
start_keeping() {
  load_state
  if [[ -n $TYPE && -n $S_TYPE && $TYPE != "$S_TYPE" ]]; then
    die "--type $TYPE: $STATE_FILE records $NAME as $S_TYPE (delete that file to start over)"
  fi
  if [[ $S_MODEL_DIR != "$MODEL_DIR" || -z $S_RUN_ID ]]; then
    S_RUN_ID=$NAME.$(basename "$MODEL_DIR").$(date -u +%Y%m%dT%H%M%SZ)
    S_MODEL_DIR=$MODEL_DIR
  fi
  poll_state
  case $STATE in
    UNKNOWN)
      [[ -n $S_TYPE ]] || die "could not describe TPU $NAME: $LAST_ERROR"
      note "could not describe TPU $NAME ($LAST_ERROR): going on with what $STATE_FILE records" ;;
    NOT_FOUND)
      if [[ -z $S_TYPE ]]; then
        require --type "$TYPE"
        S_TYPE=$TYPE S_VERSION=${IMAGE:-$(image_for "$TYPE")} S_CAPACITY=$(capacity_flag_value)
      fi
      save_state
      note "TPU $NAME does not exist: creating it ($S_TYPE, $S_VERSION, $S_CAPACITY)"
      create_slice || true ;;
    *)
      if [[ -z $S_TYPE ]]; then S_TYPE=$D_TYPE S_VERSION=$D_VERSION S_CAPACITY=$D_CAPACITY; fi
      if [[ -n $TYPE && $TYPE != "$S_TYPE" ]]; then die "--type $TYPE: TPU $NAME is $S_TYPE"; fi
      check_type "$S_TYPE"
      if [[ $S_CREATED != 1 && $ALLOW_REPLACE != 1 ]]; then
        note "TPU $NAME was not created by this keeper: it will not be deleted or recreated (--allow-replace)"
      fi ;;
  esac
  save_state
  note "keeping $NAME ($S_TYPE, $S_VERSION, $S_CAPACITY); run id $S_RUN_ID; state in $STATE_FILE"
}

capacity_flag_value() {
  if [[ $SPOT == 1 ]]; then echo spot; elif [[ $PREEMPTIBLE == 1 ]]; then echo preemptible
  elif [[ $RESERVED == 1 ]]; then echo reserved; else echo on-demand; fi
}

create_slice() {
  local flags=(--type "$S_TYPE" --image "$S_VERSION" --no-install)
  if [[ $S_CAPACITY != on-demand ]]; then flags+=("--$S_CAPACITY"); fi
  if "$HERE/create_tpu.sh" "${common[@]}" "${flags[@]}"; then
    S_CREATED=1
    save_state
    return 0
  fi
  note "could not create TPU $NAME (no capacity?): trying again in $WAIT s"
  PAUSE=$WAIT
  return 1
}

# replace REASON: a lost slice is deleted (unless it is gone already) and created again, then the run relaunched.
replace() {
  if [[ $S_CREATED != 1 && $ALLOW_REPLACE != 1 ]]; then
    stop_keeping "TPU $NAME is $1; it was not created by this keeper, so it is neither deleted nor recreated" \
      "(delete it with tpu/delete_tpu.sh, or run the keeper with --allow-replace)"
  fi
  note "TPU $NAME is $1: recreating it as $S_TYPE, $S_VERSION, $S_CAPACITY"
  if [[ $1 != NOT_FOUND ]]; then "$HERE/delete_tpu.sh" "${common[@]}" || note "the delete failed (exit $?)"; fi
  if create_slice; then relaunch; fi
}

# ---------------------------------------------------------------------------------------------- the run
STATUS_COMMAND="if [ -e $WORKER_SCRIPT ]; then $(join_quoted bash "$WORKER_SCRIPT" status "$RUN_DIR"); "
STATUS_COMMAND+="else echo 'never started'; fi"

# run_status: RUN_STATUS (tpu/on_worker.sh status's first line, "" when ssh failed) and RUN_LAST (the log's last line).
run_status() {
  local answer
  answer=$(gcloud_cmd compute tpus tpu-vm ssh "$NAME" "--zone=$ZONE" --worker=0 --command "$STATUS_COMMAND" \
             2>/dev/null) || true
  RUN_STATUS=${answer%%$'\n'*}
  RUN_LAST=""
  if [[ $answer == *$'\n'* ]]; then RUN_LAST=${answer#*$'\n'}; fi
}

launch_command() {
  LAUNCH=("$HERE/launch_pretrain.sh" "${common[@]}" --type "$S_TYPE" --image "$S_VERSION" --root "$ROOT"
          --config "$CONFIG" --recipe "$RECIPE" --model-dir "$MODEL_DIR" --run-id "$S_RUN_ID" --
          --num-train-steps "$STEPS" "${EXTRA[@]}")
}

relaunch() {
  local newest
  newest=$(newest_progress "$MODEL_DIR") || newest=""
  if [[ -n $newest && -n $PROGRESS_AT_LAUNCH && $newest -gt $PROGRESS_AT_LAUNCH ]]; then RELAUNCHES=0; fi
  if [[ $RELAUNCHES -gt $MAX_RESTARTS ]]; then
    stop_keeping "gave up: $MAX_RESTARTS relaunches in a row made no progress in $MODEL_DIR"
  fi
  RELAUNCHES=$((RELAUNCHES + 1))
  PROGRESS_AT_LAUNCH=${newest:-$PROGRESS_AT_LAUNCH}
  LAUNCHED_AT=$(date +%s)
  "${LAUNCH[@]}" || note "the launch failed (exit $?): trying again at the next check"
}

# The watchdog: stops and relaunches a run that made no progress for HANG_FACTOR x the save interval.
watchdog() {
  local newest age stopped limit=$((HANG_FACTOR * SAVE_SECS))
  [[ $limit -gt 0 ]] || return 0
  newest=$(newest_progress "$MODEL_DIR") || return 0  # unknown: nothing to act on
  if [[ $newest -lt $LAUNCHED_AT ]]; then newest=$LAUNCHED_AT; fi
  age=$(( $(date +%s) - newest ))
  [[ $age -gt $limit ]] || return 0
  note "no progress in $MODEL_DIR for ${age}s (more than $HANG_FACTOR x ${SAVE_SECS}s) while $NAME is READY:" \
       "stopping the run on worker 0 (SIGTERM, SIGKILL after ${KILL_AFTER}s) and relaunching"
  stopped=$(gcloud_cmd compute tpus tpu-vm ssh "$NAME" "--zone=$ZONE" --worker=0 \
              --command "$(join_quoted bash "$WORKER_SCRIPT" stop "$RUN_DIR" "$KILL_AFTER")") || true
  note "worker 0: ${stopped:-no answer}"
  relaunch
}

# A READY slice: what the run's state asks for (the exit codes: tpu/README.md).
on_ready() {
  local code=${RUN_STATUS#stopped }
  case $RUN_STATUS in
    running*) watchdog ;;
    "stopped $EXIT_DONE") note "pretrain on $NAME finished (exit 0)"; exit 0 ;;
    "stopped $EXIT_BAD_INPUT"|"stopped $EXIT_NON_FINITE"|"stopped $EXIT_INTERRUPTED")
      stop_keeping "pretrain on $NAME exited $code ($(meaning "$code")), not relaunched: ${RUN_LAST:-no log line}" \
        "(log: $RUN_DIR/pretrain.log on worker 0, $ROOT/logs/$(basename "$MODEL_DIR")/)" ;;
    "stopped $EXIT_TPU_LOST")
      note "pretrain on $NAME exited $code ($(meaning "$code")): checking the slice again before relaunching"
      nap "$RETRY_WAIT"
      poll_state
      if [[ $STATE == READY ]]; then relaunch; else PAUSE=0; fi ;;
    "stopped "*) note "pretrain on $NAME exited $code ($(meaning "$code")): relaunching"; relaunch ;;
    "never started") note "no run on $NAME yet: launching"; relaunch ;;
    *) note "no answer from worker 0 of $NAME: launching (a no-op if the run is alive)"; relaunch ;;
  esac
}

meaning() {
  case $1 in
    "$EXIT_RESUME") echo "stopped after a save: resumes" ;;
    "$EXIT_TPU_LOST") echo "the TPU went away mid-run: resumes" ;;
    "$EXIT_LOCKED") echo "the model dir is locked by another live run: trying again every --poll" ;;
    "$EXIT_BAD_INPUT") echo "bad flags or data" ;;
    "$EXIT_NON_FINITE") echo "non-finite loss" ;;
    "$EXIT_INTERRUPTED") echo "interrupted by Ctrl-C" ;;
    unknown) echo "the host went down under it" ;;
    *) echo "a crash" ;;
  esac
}

stop_keeping() {
  echo "$PROG: $*" >&2
  exit 1
}

finished() {
  if [[ $FINAL == gs://* ]]; then gcloud_cmd storage ls "$FINAL" >/dev/null 2>&1; else [[ -e $FINAL ]]; fi
}

# ---------------------------------------------------------------------------------------------- the loop
dry_run() {
  S_TYPE=${TYPE:-} S_VERSION=${IMAGE:-} S_CAPACITY=$(capacity_flag_value) S_RUN_ID=RUN_ID
  require --type "$S_TYPE"
  S_VERSION=${S_VERSION:-$(image_for "$S_TYPE")}
  launch_command
  note "the keeper: until $FINAL exists, every $POLL s; state in $STATE_FILE"
  gcloud_cmd storage ls "$FINAL"
  gcloud_cmd compute tpus tpu-vm describe "$NAME" "--zone=$ZONE" "--format=$DESCRIBE_FORMAT"
  note "READY: is the run alive on worker 0, and making progress?"
  gcloud_cmd compute tpus tpu-vm ssh "$NAME" "--zone=$ZONE" --worker=0 --command "$STATUS_COMMAND"
  gcloud_cmd storage ls -l "$MODEL_DIR/"
  note "stopped with a code that resumes (or never started): launch it (it resumes)"
  "${LAUNCH[@]}"
  note "no progress for $HANG_FACTOR x ${SAVE_SECS}s: stop it, then launch it"
  gcloud_cmd compute tpus tpu-vm ssh "$NAME" "--zone=$ZONE" --worker=0 \
    --command "$(join_quoted bash "$WORKER_SCRIPT" stop "$RUN_DIR" "$KILL_AFTER")"
  note "PREEMPTED or TERMINATED (a slice this keeper created, or --allow-replace): delete, create, launch"
  "$HERE/delete_tpu.sh" "${common[@]}"
  S_CREATED=1
  create_slice
  "${LAUNCH[@]}"
}

if [[ $DRY_RUN == 1 ]]; then dry_run; exit 0; fi

start_keeping
launch_command
RELAUNCHES=0 PROGRESS_AT_LAUNCH="" LAUNCHED_AT=$(date +%s) UNSETTLED_SINCE="" NOT_FOUND=0
while ! finished; do
  PAUSE=$POLL
  poll_state
  if [[ $STATE != NOT_FOUND ]]; then NOT_FOUND=0; fi
  case $STATE in
    READY) UNSETTLED_SINCE=""; run_status; on_ready ;;
    PREEMPTED|TERMINATED) UNSETTLED_SINCE=""; replace "$STATE" ;;
    NOT_FOUND)
      NOT_FOUND=$((NOT_FOUND + 1))
      if [[ $NOT_FOUND -ge 2 ]]; then NOT_FOUND=0; replace NOT_FOUND
      else note "TPU $NAME was not found: checking again before recreating it"; fi ;;
    STOPPED) stop_keeping "TPU $NAME is STOPPED (stopped by hand?): the keeper neither starts nor deletes it" ;;
    *)
      UNSETTLED_SINCE=${UNSETTLED_SINCE:-$(date +%s)}
      age=$(( $(date +%s) - UNSETTLED_SINCE ))
      detail=$STATE
      if [[ $STATE == UNKNOWN ]]; then detail="UNKNOWN ($LAST_ERROR)"; fi
      if [[ $age -gt $SETTLE_TIMEOUT ]]; then
        stop_keeping "TPU $NAME has been $detail for ${age}s (more than --settle-timeout ${SETTLE_TIMEOUT}s)"
      fi
      note "TPU $NAME is $detail: waiting (${age}s so far)" ;;
  esac
  nap "$PAUSE"
done
note "done: $FINAL"
