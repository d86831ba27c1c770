#!/usr/bin/env bash
# shellcheck source-path=SCRIPTDIR
# Vocabulary and pretraining records into the bucket: ROOT/spm.model, ROOT/records/train-*, ROOT/records/eval-*.
# Locally (albert-tf vocab + create-data on this machine, then copied), or on Dataflow (the Beam pipeline reads the
# corpus from gs:// and writes the records there; the vocabulary is trained here on a local sample).
#
# Usage: tpu/prepare_data.sh --root gs://BUCKET/PATH --corpus GLOB [--eval-corpus GLOB] [--vocab-size 30000]
#            [--num-shards 1024] [--eval-shards 64] [--seq-length 512] [--max-predictions 20] [--workers N]
#            [--work-dir DIR]
#            [--dataflow --region REGION --vocab-corpus LOCAL_GLOB [--project P]] [--dry-run] [-- BEAM OPTIONS]
#   --corpus        the text (one sentence per line, blank line between documents); gs:// with --dataflow
#   --eval-corpus   held-out text for ROOT/records/eval-* (pretrain --eval-data)
#   --eval-shards   eval files (default 64: one per host of a v3-512, each host evaluates its own files)
#   --dataflow      run create-data --beam on DataflowRunner; the workers need albert_tf: pass
#                   e.g. `-- --extra_package dist/albert_tf-0.1.0-py3-none-any.whl` (Beam options after `--`)
#   Use many shards (>= 10 x the TPU hosts): each host reads its own share of the files.

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib.sh
. "$HERE/lib.sh"

LOCAL_CLI=${LOCAL_CLI:-albert-tf}
ROOT="" CORPUS="" EVAL_CORPUS="" VOCAB_CORPUS="" VOCAB_SIZE=30000 NUM_SHARDS=1024 EVAL_SHARDS=64 SEQ_LENGTH=512
MAX_PREDICTIONS=20
WORKERS=1 WORK_DIR=albert_tf_data DATAFLOW=0 REGION=""
FLAGS="root corpus eval-corpus vocab-corpus vocab-size num-shards eval-shards seq-length max-predictions workers"
parse_flags "$FLAGS work-dir dataflow! region --" "$@"
require --root "$ROOT"
require --corpus "$CORPUS"
check_gs --root "$ROOT"
[[ $EVAL_SHARDS =~ ^[1-9][0-9]*$ ]] || die "--eval-shards $EVAL_SHARDS: expected a positive integer"
ROOT=${ROOT%/}
RECORD_FLAGS=(--max-seq-length "$SEQ_LENGTH" --max-predictions "$MAX_PREDICTIONS")

if [[ $DATAFLOW == 1 ]]; then
  require --region "$REGION"
  require --vocab-corpus "$VOCAB_CORPUS"
  check_gs --corpus "$CORPUS"
  if [[ -n $EVAL_CORPUS ]]; then check_gs --eval-corpus "$EVAL_CORPUS"; fi
  beam_flags=(--runner DataflowRunner --region "$REGION" --temp_location "$ROOT/tmp")
  if [[ -n $PROJECT ]]; then beam_flags+=(--project "$PROJECT"); fi
  beam_flags+=("${EXTRA[@]}")
  note "vocabulary on this machine from $VOCAB_CORPUS, records on Dataflow in $REGION"
  run "$LOCAL_CLI" vocab --input "$VOCAB_CORPUS" --output-prefix "$WORK_DIR/spm" --vocab-size "$VOCAB_SIZE"
  gcloud_cmd storage cp "$WORK_DIR/spm.model" "$ROOT/spm.model"
  run "$LOCAL_CLI" create-data --beam --input "$CORPUS" --spm-model "$ROOT/spm.model" \
    --output "$ROOT/records/train" --num-shards "$NUM_SHARDS" "${RECORD_FLAGS[@]}" -- "${beam_flags[@]}"
  if [[ -n $EVAL_CORPUS ]]; then
    run "$LOCAL_CLI" create-data --beam --input "$EVAL_CORPUS" --spm-model "$ROOT/spm.model" \
      --output "$ROOT/records/eval" --num-shards "$EVAL_SHARDS" "${RECORD_FLAGS[@]}" -- "${beam_flags[@]}"
  fi
else
  [[ ${#EXTRA[@]} -eq 0 ]] || die "Beam options after -- need --dataflow"
  note "vocabulary and records on this machine in $WORK_DIR, then copied to $ROOT"
  run mkdir -p "$WORK_DIR/records"
  run "$LOCAL_CLI" vocab --input "$CORPUS" --output-prefix "$WORK_DIR/spm" --vocab-size "$VOCAB_SIZE"
  run "$LOCAL_CLI" create-data --input "$CORPUS" --spm-model "$WORK_DIR/spm.model" \
    --output "$WORK_DIR/records/train" --num-shards "$NUM_SHARDS" "${RECORD_FLAGS[@]}" --workers "$WORKERS"
  if [[ -n $EVAL_CORPUS ]]; then
    run "$LOCAL_CLI" create-data --input "$EVAL_CORPUS" --spm-model "$WORK_DIR/spm.model" \
      --output "$WORK_DIR/records/eval" --num-shards "$EVAL_SHARDS" "${RECORD_FLAGS[@]}" --workers "$WORKERS"
  fi
  gcloud_cmd storage cp -r "$WORK_DIR/records" "$ROOT/"
  gcloud_cmd storage cp "$WORK_DIR/spm.model" "$ROOT/spm.model"
fi
