"""The experiment config, the ground floor: one dataclass schema (`schema`), composing (`compose`, merged onto the
schema by `merge`), reading a saved one (`saved`), a config as plain data (`dicts`), the schema's own rules
(`validation`). It asks no registry and imports no plugin: `ablate.experiment.load_config` does, above the model and
the data. Code gets a typed `ExperimentConfig`, never a raw DictConfig.
"""

from ablate.config.compose import compose
from ablate.config.dicts import diff, flatten, to_dict, to_yaml
from ablate.config.merge import merge
from ablate.config.saved import check_saved_types, read_run_config, rebuild, with_defaults
from ablate.config.schema import DataConfig, ExperimentConfig, LoggingConfig, ModelConfig, SweepConfig, TrainConfig
from ablate.messages.errors import ConfigError

__all__ = [
    "ConfigError", "DataConfig", "ExperimentConfig", "LoggingConfig", "ModelConfig", "SweepConfig", "TrainConfig",
    "check_saved_types", "compose", "diff", "flatten", "merge", "read_run_config", "rebuild", "to_dict", "to_yaml",
    "with_defaults",
]  # fmt: skip
