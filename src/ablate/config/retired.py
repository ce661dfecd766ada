"""Keys ablate no longer has: dropped from config files and saved configs alike, so a run that recorded one still
loads (a value other than its old default is named in a warning); never offered anew as an override."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)

# Keys ablate no longer has -> why: dropped from files and saved configs, so a run that recorded one still loads.
RETIRED = {"train.debug_nan_step": "a test aid; tests inject faults through a plugin of their own"}


def without_retired(data: dict, source: str) -> dict:
    """`data` less the RETIRED keys; one set to anything but its old default (0) is named in a warning."""
    for dotted, why in RETIRED.items():
        section, key = dotted.split(".")
        if isinstance(data.get(section), dict) and key in data[section]:
            value = data[section][key]
            data = {**data, section: {k: v for k, v in data[section].items() if k != key}}
            if value not in (0, None):
                log.warning("%s: %s=%r is ignored: the key is retired (%s)", source, dotted, value, why)
    return data
