"""The experiment config: one dataclass schema (`schema`), loading and saving (`load`), cross-field rules (`validation`).

Load order: schema defaults -> each YAML file -> CLI dotlist overrides -> `validate()`; code gets a typed
`ExperimentConfig`, never a raw DictConfig.
"""

from ablate.config.load import check_saved_types, diff, flatten, from_dict, load_config, merge, to_dict, to_yaml, with_defaults
from ablate.config.schema import DataConfig, ExperimentConfig, LoggingConfig, ModelConfig, SweepConfig, TrainConfig
from ablate.config.validation import validate
from ablate.messages.errors import ConfigError

__all__ = [
    "ConfigError", "DataConfig", "ExperimentConfig", "LoggingConfig", "ModelConfig", "SweepConfig", "TrainConfig",
    "check_saved_types", "diff", "flatten", "from_dict", "load_config", "merge", "to_dict", "to_yaml", "validate", "with_defaults",
]  # fmt: skip
