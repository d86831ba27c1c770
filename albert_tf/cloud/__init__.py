"""Cloud TPU orchestration: a thin layer over the `gcloud` CLI (each call with a timeout, its failures classified),
the keeper's decision table and loop. No TensorFlow here: `albert-tf keep-alive` runs on a laptop.

    gcloud      run gcloud with a timeout → a Result, its failure classified
    tpu_node    describe / create / delete a node, its queued resource, ssh and scp to worker 0
    images      the runtime image: chosen from the zone's versions list, or a fixed default with its source
    worker      what runs on worker 0 (status, the launch script: install, detached start); on_worker.sh
    decisions   the decision table, as data
    keeper      the loop, with an injectable clock and gcloud runner
"""
