#!/usr/bin/env bash
# The keeper: runs `albert-tf keep-alive` (albert_tf/jobs/keep_alive.py) from this checkout, with the same flags.
# It keeps a pretraining run going on a Cloud TPU slice until its last checkpoint exists, replaces only a lost slice
# (PREEMPTED, TERMINATED, NOT_FOUND twice) that it created, gets Spot capacity through a queued resource, and deletes
# what it created when it ends (unless --keep-slice); its last line says what is left billing. What it does in each
# state: docs/tpu.md, "The keeper".
#
# Usage: tpu/keep_alive.sh --name NAME --zone ZONE --root gs://BUCKET/PATH --config CONFIG [--type TYPE]
#            [--image VERSION] [--spot | --preemptible | --reserved] [--allow-replace] [--keep-slice]
#            [--recipe paper_v2] [--model-dir gs://...] [--num-train-steps 125000] [--no-eval] [--poll 300] [--retries 3]
#            [--retry-wait 10] [--settle-timeout 3600] [--wait 60] [--max-restarts 10] [--state-file PATH]
#            [--project P] [--valid-until-duration 6h] [--internal-ip] [--tunnel-through-iap]
#            [--service-account EMAIL] [--dry-run | --print-service] [-- PRETRAIN FLAGS]
#   TYPE as Google spells it: v3-32, v4-32, v5litepod-16, v5p-8 (v5e and v5p are queued resources); the image is
#   the zone's newest suitable one unless --image. Every flag: the list below (albert-tf keep-alive --help). Exit
#   status: 0 done; 4 stopped, the reason in one line; 2 bad flags; 77 another keeper holds the state file; 130
#   Ctrl-C; 143 SIGTERM or SIGHUP. ALBERT_TF_PYTHON_HERE names the Python that runs it here (default python3).

set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
export PYTHONPATH="$HERE/..${PYTHONPATH:+:$PYTHONPATH}"
for arg in "$@"; do
  [[ $arg != -- ]] || break
  if [[ $arg == -h || $arg == --help ]]; then sed -n '2,/^$/{s/^# \{0,1\}//;p}' "$0"; fi
done
exec "${ALBERT_TF_PYTHON_HERE:-python3}" -m albert_tf.cli keep-alive "$@"
