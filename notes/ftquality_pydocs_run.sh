set -e
# run from the repo root after: python notes/ftquality_pydocs_task.py /tmp/ftq/pydocs; task2 = its labels 0/1 rows
P=/tmp/ftq/pydocs; export PYTHONPATH=$PWD TF_CPP_MIN_LOG_LEVEL=2
A="/work/venv/bin/python -m albert_tf"
mkdir -p $P/task2; for s in train dev; do (head -1 $P/task/$s.tsv; awk -F"\t" 'NR>1 && ($2=="0"||$2=="1")' $P/task/$s.tsv) > $P/task2/$s.tsv; done
date
$A vocab --input $P/corpus.txt --output-prefix $P/spm --vocab-size 4000 | tail -1
$A create-data --input $P/corpus.txt --spm-model $P/spm.model --output $P/data/train --max-seq-length 128 --max-predictions 20 --dupe-factor 2 --seed 0 | tail -1
/work/venv/bin/python -c "from albert_tf import AlbertConfig, configs_dir; import os; AlbertConfig.from_json_file(os.path.join(configs_dir(), 'albert_tiny.json')).replace(vocab_size=4000).to_json_file('$P/albert_config.json')"
date
$A pretrain --config $P/albert_config.json --train-data "$P/data/train*" --model-dir $P/model --spm-model $P/spm.model --max-seq-length 128 --max-predictions 20 --train-batch-size 32 --learning-rate 0.002 --num-train-steps 300 --num-warmup-steps 30 --steps-per-loop 100 --save-checkpoints-steps 300 | grep "train step\|done"
date
/work/venv/bin/python -c "import sys; sys.path.insert(0,'tests'); import finetune_helpers as fh; fh.save_random_init('$P/random', '$P/spm.model')"
for init in model random; do
$A finetune --task sst2 --data-dir $P/task2 --init $P/$init --output $P/ft-$init --epochs 3 --batch-size 32 --max-seq-length 64 --learning-rate 0.001 --warmup-proportion 0.1 --classifier-dropout 0.0 --seed 12345 2>&1 | grep -v "^[IEW]0000" | grep "epoch\|spread\|warning\|done"
date
done
