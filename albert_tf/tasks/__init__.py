"""Fine-tuning tasks: each in its own package, behind one small interface (`base.FinetuneTask`).

    glue/     GLUE's TSVs (cola sst2 mrpc stsb qqp mnli qnli rte wnli): reader, metrics, classifier export, adapter
    squad/    SQuAD v1.1 / v2.0: reader, featurizer (Python and in-graph), answers and official scores, export, adapter
    race/     RACE: reader, featurizer (Python and in-graph), accuracy per level, export, adapter
    metrics   accuracy, F1, MCC, Pearson, Spearman in numpy
    pipelines fine-tuning's tf.data pipelines, shared by the adapters
    base      FinetuneTask, the interface `albert-tf finetune` calls
    adapters  make_task: a task name's adapter (its finetune.py class, named in the task registry)
    budget    a run's resolved hyperparameters (Budget) over the paper's (the registry's rows)
    task_model_export
              export_task_model: a classifier trained in a notebook → finetune's raw-text SavedModel

The tasks are registered once, in albert_tf/settings/task_registry.py (a row per task: family, adapter, paper's
hyperparameters, GLUE's file layout); TASKS, the names, is a live view of it.

Readers, featurizers and metrics are Python + numpy (+ sentencepiece through AlbertTokenizer): `from albert_tf.tasks
import squad` imports no TensorFlow; the in_graph, *_export, finetune, pipelines and adapters modules do.
"""
from albert_tf.settings.finetune_config import TASKS  # noqa: F401  (its one home: the task registry)
