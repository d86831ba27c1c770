#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Exports the trained model (`albert-tf export`: SavedModels for TF Serving and for fine-tuning) from the model dir
# to gs://. Runs on this machine (albert_tf installed, gcloud credentials), or with --name on worker 0 of the TPU.
#
# Usage: tpu/export.sh (--model-dir gs://... | --root gs://BUCKET/PATH --config CONFIG) [--output gs://...]
#            [--name NAME --zone ZONE] [--project P] [--dry-run] [-- EXPORT FLAGS]
#   --output   default ROOT/export/CONFIG (or MODEL_DIR/export)

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

LOCAL_CLI=${LOCAL_CLI:-albert-tf}
ROOT="" CONFIG="" MODEL_DIR="" OUTPUT="" NAME="" ZONE=""
parse_flags "root config model-dir output name zone --" "$@"
if [[ -z $MODEL_DIR ]]; then
  require --root "$ROOT"
  require --config "$CONFIG"
  MODEL_DIR=${ROOT%/}/models/$(basename "${CONFIG%.json}")
  OUTPUT=${OUTPUT:-${ROOT%/}/export/$(basename "${CONFIG%.json}")}
fi
OUTPUT=${OUTPUT:-${MODEL_DIR%/}/export}
check_gs --model-dir "$MODEL_DIR"
check_gs --output "$OUTPUT"

if [[ -n $NAME ]]; then
  require --zone "$ZONE"
  read -r -a cli <<< "$ALBERT_TF"
  gcloud_cmd compute tpus tpu-vm ssh "$NAME" "--zone=$ZONE" --worker=0 \
    --command "$(join_quoted "${cli[@]}" export --init "$MODEL_DIR" --output "$OUTPUT" "${EXTRA[@]}")"
else
  run "$LOCAL_CLI" export --init "$MODEL_DIR" --output "$OUTPUT" "${EXTRA[@]}"
fi
