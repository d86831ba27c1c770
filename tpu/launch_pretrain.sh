#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Starts `albert-tf pretrain` on worker 0 of the TPU (gcloud ... ssh --worker=0). TensorFlow drives a TPU from one
# client: on a v3-8 VM with `--tpu local`, on a pod slice from worker 0 with `--tpu NAME`, the other hosts running
# the TPU runtime's workers (each host's input pipeline reads its own share of the record files). Running the same
# command again resumes from the latest checkpoint in the model dir (same learning rate, same data order).
#
# Usage: tpu/launch_pretrain.sh --name NAME --zone ZONE --type TYPE --root gs://BUCKET/PATH --config CONFIG
#            [--recipe paper_v2] [--model-dir gs://...] [--no-eval] [--project P] [--dry-run] [-- PRETRAIN FLAGS]
#   --root       holds spm.model and records/train-* (and records/eval-*), as tpu/prepare_data.sh writes them
#   --config     a preset name (albert_base, ..., bert_large) or a gs:// albert_config.json
#   --recipe     the pretraining flag set (default paper_v2: batch 4096, lr 0.00176, 125k steps, 3125 warm-up,
#                seq 512, 20 predictions, no dropout); flags after `--` win over it
#   --model-dir  default ROOT/models/CONFIG
#   The output is appended to ~/pretrain.log on worker 0.

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

NAME="" ZONE="" TYPE="" ROOT="" CONFIG="" RECIPE=paper_v2 MODEL_DIR="" NO_EVAL=0
parse_flags "name zone type root config recipe model-dir no-eval! --" "$@"
require --name "$NAME"
require --zone "$ZONE"
require --type "$TYPE"
require --root "$ROOT"
require --config "$CONFIG"
check_type "$TYPE"
check_gs --root "$ROOT"
check_config "$CONFIG"
ROOT=${ROOT%/}
MODEL_DIR=${MODEL_DIR:-$ROOT/models/$(basename "${CONFIG%.json}")}
check_gs --model-dir "$MODEL_DIR"

if [[ $(hosts_of "$TYPE") -gt 1 ]]; then TPU=$NAME; else TPU=local; fi
read -r -a cli <<< "$ALBERT_TF"
words=("${cli[@]}" pretrain --tpu "$TPU" --recipe "$RECIPE" --config "$CONFIG"
       --train-data "$ROOT/records/train-*" --model-dir "$MODEL_DIR" --spm-model "$ROOT/spm.model")
if [[ $NO_EVAL == 0 ]]; then words+=(--eval-data "$ROOT/records/eval-*"); fi
words+=("${EXTRA[@]}")
note "$TYPE: $(hosts_of "$TYPE") host(s); pretrain runs on worker 0 with --tpu $TPU"
gcloud_cmd compute tpus tpu-vm ssh "$NAME" "--zone=$ZONE" --worker=0 \
  --command "set -o pipefail; $(join_quoted "${words[@]}") 2>&1 | tee -a ~/pretrain.log"
