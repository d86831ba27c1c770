#!/usr/bin/env bash
# Runs ON worker 0 of a TPU VM or pod slice (tpu/launch_pretrain.sh copies it there as albert_tf_run/on_worker.sh):
# starts one command detached from the ssh session (setsid + nohup: a dropped ssh does not stop it), says whether
# it still runs and how it ended, tails its log, stops it. One run per RUN_DIR: a lock (flock) is held for as long
# as it lives.
#
# Usage: on_worker.sh start RUN_DIR LOG_URL [NAME=VALUE ... | --env-file FILE] -- COMMAND [ARGS ...]
#        on_worker.sh status RUN_DIR   "running PID" (exit 0); "stopped EXIT_CODE" (exit 1; "unknown" when the
#                                      host went down under it) and the log's last line on a second line; or
#                                      "never started" (exit 3)
#        on_worker.sh follow RUN_DIR   tail -F of the log (Ctrl-C ends the tail, not the run)
#        on_worker.sh stop RUN_DIR [SECONDS]
#                                      SIGTERM to the run (pretrain saves at the end of the compiled call in
#                                      flight and exits 75); when it still runs SECONDS later (default 120), SIGKILL
#   RUN_DIR/pretrain.log collects the output of every start; each start's output is also copied to
#   LOG_URL/pretrain-<UTC start time>.log every $LOG_COPY_SECONDS (default 60) and when it ends (LOG_URL "-": none).
#   NAME=VALUE pairs are exported for COMMAND (the TPU runtime's variables, the run id); --env-file FILE: the
#   pairs, one a line, from FILE (the keeper's way: no argv carries them). Each log copy is bounded
#   by $LOG_COPY_TIMEOUT seconds (default 120: a wedged `gcloud storage cp` never holds the run "running"). A
#   teardown is bounded too: COMMAND is given ALBERT_TF_EXIT_FILE (albert-tf writes its exit code there before
#   Python's teardown); when it still runs $TEARDOWN_SECONDS (default 120) after writing it, it is killed and its
#   written code is its exit code.
#   The exit codes of `albert-tf pretrain` and what each asks for: tpu/README.md, "Exit codes".

set -euo pipefail

usage() {
  sed -n '2,/^$/{s/^# \{0,1\}//;p}' "$0"
  exit 2
}

# Holds the lock while COMMAND runs (COMMAND inherits it: it stays held while COMMAND lives); forwards
# SIGTERM/SIGINT/SIGHUP to it; records its exit code.
supervise() {
  local run_dir=$1 log_url=$2 log started child copier bound code="" rc lock_fd pair
  shift 2
  exec {lock_fd}>> "$run_dir/lock"
  flock -w 10 "$lock_fd" || exit 1
  while [[ $# -gt 0 && $1 != -- ]]; do
    if [[ $1 == --env-file ]]; then
      while IFS= read -r pair || [[ -n $pair ]]; do [[ -z $pair ]] || export "${pair?}"; done < "$2"
      shift 2
    else
      export "${1?}"
      shift
    fi
  done
  shift
  log=$run_dir/pretrain.log
  started=$(date -u +%Y%m%dT%H%M%SZ)
  echo $$ > "$run_dir/pid"
  echo "=== $started start: $*" >> "$log"
  rm -f "$run_dir/exit_reported"
  ALBERT_TF_EXIT_FILE=$(cd "$run_dir" && pwd)/exit_reported "$@" >> "$log" 2>&1 < /dev/null &
  child=$!
  echo "$child" > "$run_dir/child"
  trap 'kill -TERM "$child" 2>/dev/null || true' TERM INT HUP
  copy_log() {
    if [[ $log_url != - ]]; then
      timeout -k 5 "${LOG_COPY_TIMEOUT:-120}" gcloud storage cp --quiet "$log" "$log_url/pretrain-$started.log" \
        > /dev/null 2>&1 || true
    fi
  }
  # The teardown's bound: once the command has reported its exit code, it has TEARDOWN_SECONDS to end.
  (
    exec {lock_fd}>&-
    while kill -0 "$child" 2>/dev/null; do
      if [[ -e $run_dir/exit_reported ]]; then
        sleep "${TEARDOWN_SECONDS:-120}"
        if kill -KILL "$child" 2>/dev/null; then
          echo "=== teardown did not end within ${TEARDOWN_SECONDS:-120}s of its exit code: killed" >> "$log"
        fi
        break
      fi
      sleep 1
    done
  ) &
  bound=$!
  # The periodic copy: without the lock (it must not hold it after the run), and only while this supervisor lives.
  (
    exec {lock_fd}>&-
    seconds=0
    while kill -0 "$$" 2>/dev/null; do
      sleep 1
      seconds=$((seconds + 1))
      if (( seconds % ${LOG_COPY_SECONDS:-60} == 0 )); then copy_log; fi
    done
  ) &
  copier=$!
  # `wait` returns early when a trapped signal arrives (the child still runs): wait again until it has ended.
  while [[ -z $code ]]; do
    rc=0
    wait "$child" || rc=$?
    if ! kill -0 "$child" 2>/dev/null; then code=$rc; fi
  done
  kill "$copier" "$bound" 2>/dev/null || true
  if [[ $code == 137 && -s $run_dir/exit_reported ]]; then code=$(tr -dc 0-9 < "$run_dir/exit_reported"); fi
  echo "=== $(date -u +%Y%m%dT%H%M%SZ) exit $code" >> "$log"
  echo "$code" > "$run_dir/exit_code"
  copy_log
}

running() {
  ! flock -n "$1/lock" true
}

# stop RUN_DIR SECONDS: SIGTERM, then SIGKILL to the command (and to its supervisor if that lingers).
stop() {
  local run_dir=$1 seconds=$2
  if ! running "$run_dir"; then echo "not running"; return; fi
  kill -TERM "$(cat "$run_dir/pid")" 2>/dev/null || true
  for _ in $(seq "$(tenths "$seconds")"); do
    running "$run_dir" || { echo "stopped after SIGTERM"; return; }
    sleep 0.1
  done
  kill -KILL "$(cat "$run_dir/child")" 2>/dev/null || true
  for _ in $(seq 50); do
    running "$run_dir" || { echo "killed (SIGKILL) after ${seconds}s"; return; }
    sleep 0.1
  done
  kill -KILL "$(cat "$run_dir/pid")" 2>/dev/null || true
  echo "killed (SIGKILL) after ${seconds}s, its supervisor too"
}

# tenths SECONDS: "2" -> 20, "0.5" -> 5 (checked by the caller).
tenths() {
  [[ $1 =~ ^([0-9]+)(\.([0-9]))?$ ]]
  echo $(( 10#${BASH_REMATCH[1]} * 10 + ${BASH_REMATCH[3]:-0} ))
}

[[ $# -ge 2 ]] || usage
action=$1 run_dir=$2
shift 2
case $action in
  start)
    [[ $# -ge 3 ]] || usage
    mkdir -p "$run_dir"
    if running "$run_dir"; then
      echo "already running: pid $(cat "$run_dir/pid"), log $run_dir/pretrain.log"
      exit 0
    fi
    rm -f "$run_dir/exit_code"
    setsid nohup bash "$0" _supervise "$run_dir" "$@" > /dev/null 2>&1 < /dev/null &
    for _ in $(seq 100); do
      if running "$run_dir" || [[ -e $run_dir/exit_code ]]; then break; fi
      sleep 0.1
    done
    echo "started: log $run_dir/pretrain.log" ;;
  _supervise) supervise "$run_dir" "$@" ;;
  status)
    if [[ ! -e $run_dir/pid ]]; then echo "never started"; exit 3; fi
    if running "$run_dir"; then echo "running $(cat "$run_dir/pid")"; exit 0; fi
    echo "stopped $(cat "$run_dir/exit_code" 2>/dev/null || echo unknown)"
    grep -v '^=== ' "$run_dir/pretrain.log" 2>/dev/null | tail -n 1 || true
    exit 1 ;;
  follow) exec tail -n 100 -F "$run_dir/pretrain.log" ;;
  stop)
    [[ ${1:-120} =~ ^[0-9]+(\.[0-9])?$ ]] || usage
    stop "$run_dir" "${1:-120}" ;;
  *) usage ;;
esac
