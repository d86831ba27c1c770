"""Every job's settings and result, below the code that reads them: `XConfig` (a dataclass of
`albert_tf.run_config.option` fields, each a flag of `albert-tf x`, checked when the config is made) and `XResult`
(what `albert_tf.x(config)` returns). training/, data/, tasks/ and cloud/ take and return these types; jobs/ holds the
calls, the command-line extras and the registry. No TensorFlow.

    runtime_options      RuntimeOptions: tpu, cpu_replicas, dtype, xla (embedded in pretrain's and finetune's)
    vocab_config         VocabConfig, VocabResult
    create_data_config   CreateDataConfig, CreateDataResult
    pretrain_config      PretrainConfig, PretrainResult, the recipes (RECIPES, read_recipe)
    finetune_config      FinetuneConfig, FinetuneResult, the task and optimizer names
    task_registry        the fine-tuning tasks, one row each (family, adapter, paper's hyperparameters, GLUE layout)
    convert_config       ConvertConfig, ConvertResult, the released models' names
    export_config        ExportConfig, ExportResult
    plan_config          PlanConfig, PlanResult
    keeper_config        KeepAliveConfig, KeepAliveResult
    quickstart_config    QuickstartConfig, QuickstartResult
    run_length           a pretraining run's length and its sequence-length phases (--phases, --budget-tokens,
                         --budget-hours), as arithmetic that pretrain and plan share
    defaults             the defaults several commands share (the paper's pretraining, the masking, the seed)
    casing               cased_option, the one --cased / --uncased
"""
from albert_tf.settings.convert_config import ConvertConfig, ConvertResult
from albert_tf.settings.create_data_config import CreateDataConfig, CreateDataResult
from albert_tf.settings.export_config import ExportConfig, ExportResult
from albert_tf.settings.finetune_config import FinetuneConfig, FinetuneResult
from albert_tf.settings.keeper_config import KeepAliveConfig, KeepAliveResult
from albert_tf.settings.plan_config import PlanConfig, PlanResult
from albert_tf.settings.pretrain_config import PretrainConfig, PretrainResult
from albert_tf.settings.quickstart_config import QuickstartConfig, QuickstartResult
from albert_tf.settings.runtime_options import RuntimeOptions
from albert_tf.settings.vocab_config import VocabConfig, VocabResult

__all__ = ["RuntimeOptions", "VocabConfig", "VocabResult", "CreateDataConfig", "CreateDataResult", "PretrainConfig",
           "PretrainResult", "FinetuneConfig", "FinetuneResult", "ConvertConfig", "ConvertResult", "ExportConfig",
           "ExportResult", "PlanConfig", "PlanResult", "KeepAliveConfig", "KeepAliveResult", "QuickstartConfig",
           "QuickstartResult"]
