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
"""Droplet Search: coordinate descent over integer points with statistical acceptance.

The search of Canesche et al., "The Droplet Search Algorithm for Kernel
Scheduling" (ACM TACO 21(2), 2024), for TVM's schedulers.  It imports nothing
from TVM: a *point* is a tuple of integers, one per dimension, and a
scheduler's search space maps points to its configurations or schedules.

:class:`DropletSearch` proposes points (``ask``) and receives their costs
(``tell``): the scheduler measures them its own way.

:class:`BatchDriver` runs the measurement loop around one callback that builds,
runs, checks and records a batch of points; :class:`DropletResult` reports it.
:class:`SharedBudget` spends one budget over a model's tasks, heaviest first.
"""
from .budget import FirstPass, SharedBudget, check_task_weights, share_order
from .driver import BatchDriver
from .neighbourhood import Point
from .report import DropletResult, error_summary
from .search import Costs, DropletSearch, is_count
from .statistics import has_lower_mean, is_faster, mean
