#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Starts `albert-tf pretrain` DETACHED on worker 0 of the TPU (it survives the ssh session; a second launch while it
# runs is a no-op), with the TPU runtime's variables as Google's TF-on-TPU tests set them:
#   one host (v3-8, v4-8, v5litepod-8; PJRT image): --tpu local, TPU_NAME=local, NEXT_PLUGGABLE_DEVICE_USE_C_API=true,
#                                 TF_PLUGGABLE_DEVICE_LIBRARY_PATH=/lib/libtpu.so
#   a pod slice (more hosts: the device table, albert_tf/runtime/devices.py): --tpu NAME, TPU_NAME=NAME,
#                                 TPU_LOAD_LIBRARY=0, on worker 0 only (the client loads no TPU runtime: the
#                                 slice's workers run it; each host feeds its own devices)
# and ALBERT_TF_TPU_IMAGE=<the image>, which pretrain's runtime check reads. Running it again after the run
# stopped resumes from the latest checkpoint in the model dir (same learning rate, same data order).
# When albert_tf does not import on worker 0 (checked with TPU_LOAD_LIBRARY=0), it is installed first (as
# tpu/install.sh does): a failed install fails this launch, and the next launch tries again.
#
# Usage: tpu/launch_pretrain.sh --name NAME --zone ZONE --type TYPE --root gs://BUCKET/PATH --config CONFIG
#            [--recipe paper_v2] [--model-dir gs://...] [--no-eval] [--image VERSION] [--run-id ID] [--follow]
#            [--project P] [--dry-run] [-- PRETRAIN FLAGS]
#   --root       holds spm.model and records/train-* (and records/eval-*), as tpu/prepare_data.sh writes them
#   --config     a preset name (albert_base, ..., bert_large) or a gs:// albert_config.json
#   --recipe     the pretraining flag set (default paper_v2: batch 4096, lr 0.00176, 125k steps, 3125 warm-up,
#                seq 512, 20 predictions, no dropout); flags after `--` win over it
#   --model-dir  default ROOT/models/CONFIG
#   --image      the slice's runtime version (default: what tpu/create_tpu.sh creates for TYPE)
#   --follow     then tail the run's log (Ctrl-C ends the tail; the run goes on)
#   The log: albert_tf_run/pretrain.log on worker 0, copied every minute to ROOT/logs/MODEL/pretrain-<start>.log.
#   TPU_PJRT_LIBRARY overrides /lib/libtpu.so (e.g. the libtpu package's libtpu.so on a pip-installed TensorFlow).

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

NAME="" ZONE="" TYPE="" ROOT="" CONFIG="" RECIPE=paper_v2 MODEL_DIR="" NO_EVAL=0 IMAGE="" RUN_ID="" FOLLOW=0
parse_flags "name zone type root config recipe model-dir no-eval! image run-id follow! --" "$@"
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
IMAGE=${IMAGE:-$(image_for "$TYPE")}
TPU_PJRT_LIBRARY=${TPU_PJRT_LIBRARY:-/lib/libtpu.so}

# The runtime: a pod slice's client on worker 0 connects to the slice by name and loads no runtime; a single host
# loads it (PJRT unless the image says StreamExecutor: tpu-vm-tf-X[-se], as Google's tests run those).
if [[ $(hosts_of "$TYPE") -gt 1 ]]; then
  [[ $IMAGE != tpu-vm-tf-* || $IMAGE == *-pod* ]] || die "--image $IMAGE is a single-host image; $TYPE is a pod slice"
  TPU=$NAME
  runtime=(TPU_NAME="$NAME" TPU_LOAD_LIBRARY=0)
else
  [[ $IMAGE != *-pod* ]] || die "--image $IMAGE is a pod image; $TYPE is a single host"
  TPU=local
  runtime=(TPU_NAME=local)
  if [[ $IMAGE != tpu-vm-tf-* || $IMAGE == *-pjrt* ]]; then
    runtime+=(NEXT_PLUGGABLE_DEVICE_USE_C_API=true TF_PLUGGABLE_DEVICE_LIBRARY_PATH="$TPU_PJRT_LIBRARY")
  fi
fi
runtime+=(ALBERT_TF_TPU_IMAGE="$IMAGE")
if [[ -n $RUN_ID ]]; then runtime+=(ALBERT_TF_RUN_ID="$RUN_ID"); fi

read -r -a cli <<< "$ALBERT_TF"
words=("${cli[@]}" pretrain --tpu "$TPU" --recipe "$RECIPE" --config "$CONFIG"
       --train-data "$ROOT/records/train-*" --model-dir "$MODEL_DIR" --spm-model "$ROOT/spm.model")
if [[ $NO_EVAL == 0 ]]; then words+=(--eval-data "$ROOT/records/eval-*"); fi
words+=("${EXTRA[@]}")

remote="$(join_quoted mkdir -p "$RUN_DIR") && $(join_quoted mv -f "$WORKER_SCRIPT_COPY" "$WORKER_SCRIPT") && "
remote+="{ $(install_check) 2>/dev/null || { echo 'albert_tf is missing on worker 0: installing it' && "
remote+="$(install_command "$IMAGE"); }; } && "
remote+=$(join_quoted bash "$WORKER_SCRIPT" start "$RUN_DIR" "$ROOT/logs/$(basename "$MODEL_DIR")" "${runtime[@]}" -- \
          "${words[@]}")
if [[ $FOLLOW == 1 ]]; then remote+=" && $(join_quoted bash "$WORKER_SCRIPT" follow "$RUN_DIR")"; fi
note "$TYPE: $(hosts_of "$TYPE") host(s), image $IMAGE; pretrain runs detached on worker 0 with --tpu $TPU"
gcloud_cmd compute tpus tpu-vm scp "$HERE/on_worker.sh" "$NAME:$WORKER_SCRIPT_COPY" "--zone=$ZONE" --worker=0
gcloud_cmd compute tpus tpu-vm ssh "$NAME" "--zone=$ZONE" --worker=0 --command "$remote"
