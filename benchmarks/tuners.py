# Licensed to the Apache Software Foundation (ASF) under one
# or more contributor license agreements.  See the NOTICE file
# distributed with this work for additional information
# regarding copyright ownership.  The ASF licenses this file
# to you under the Apache License, Version 2.0 (the
# "License"); you may not use this file except in compliance
# with the License.  You may obtain a copy of the License at
#
#   http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing,
# software distributed under the License is distributed on an
# "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY
# KIND, either express or implied.  See the License for the
# specific language governing permissions and limitations
# under the License.
"""AutoTVM tuners by name, as every benchmark calls them.

``droplet`` is :class:`DropletTuner` with its defaults, ``droplet:key=value:...``
the same with options (``droplet:pvalue=0.25:handover=none``), ``droplet-stop``
one without a handover (it stops where Droplet Search converges, as the first
Droplet tuner did); ``xgb`` is AutoTVM's default ``XGBTuner`` (loop features),
``xgb-knob`` one with knob features; ``ga``, ``random`` and ``gridsearch`` are
AutoTVM's other tuners.
"""
import random
from typing import Callable, Dict, Optional, Sequence

import numpy as np

from tvm import autotvm

TUNERS: Dict[str, Callable] = {
    "droplet": lambda task: autotvm.tuner.DropletTuner(task),
    "droplet-stop": lambda task: autotvm.tuner.DropletTuner(task, handover=None),
    "xgb": lambda task: autotvm.tuner.XGBTuner(task),
    "xgb-knob": lambda task: autotvm.tuner.XGBTuner(task, feature_type="knob"),
    "ga": lambda task: autotvm.tuner.GATuner(task, pop_size=32),
    "random": lambda task: autotvm.tuner.RandomTuner(task),
    "gridsearch": lambda task: autotvm.tuner.GridSearchTuner(task),
}
"""The tuners by plain name; ``droplet:key=value:...`` is accepted as well."""


def option_value(text: str):
    """A ``key=value`` option's value: an int, a float, a bool, None or the text itself."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False, "none": None}.get(text.lower(), text)


def is_tuner_name(name: str) -> bool:
    """Whether :func:`make_tuner` knows ``name``."""
    return name in TUNERS or name.startswith("droplet:")


def unknown_tuners_message(names: Sequence[str]) -> str:
    """The error for tuner ``names`` :func:`make_tuner` does not know, with the known ones."""
    return f"unknown tuners {list(names)}; choose from {', '.join(TUNERS)} or droplet:key=value"


def seed_generators(seed: int) -> None:
    """Seed Python's and numpy's generators, which AutoTVM's tuners draw from."""
    random.seed(seed)
    np.random.seed(seed)


def make_tuner(name: str, task, seed: Optional[int] = None):
    """The tuner called ``name`` for ``task``; seeds Python's and numpy's generators first.

    Parameters
    ----------
    name : str
        A name of :data:`TUNERS`, or ``droplet:key=value:...``.
    task : autotvm.task.Task
        The task to tune.
    seed : Optional[int]
        The seed of ``random`` and ``numpy.random`` (the tuners draw from both);
        left alone when None.
    """
    if seed is not None:
        seed_generators(seed)
    if name in TUNERS:
        return TUNERS[name](task)
    if name.startswith("droplet:"):
        options = {}
        for item in name.split(":")[1:]:
            key, separator, value = item.partition("=")
            if not separator or not key:
                raise ValueError(f"tuner {name!r}: options are key=value, got {item!r}")
            options[key] = option_value(value)
        return autotvm.tuner.DropletTuner(task, **options)
    raise ValueError(unknown_tuners_message([name]))
