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
"""The acceptance test of Droplet Search: is a candidate convincingly faster?"""
import math
from statistics import fmean as mean
from statistics import variance
from typing import Optional, Sequence


def has_lower_mean(costs: Optional[Sequence[float]], other: Optional[Sequence[float]]) -> bool:
    """Whether ``costs`` are a success with a lower mean than ``other``, or ``other`` failed.

    The rule for records without a test between them (both read from a log or
    database, or kept per point): of two records of one point or program, the
    successful one with the lowest mean is its best, and a tie keeps the
    earlier.

    Parameters
    ----------
    costs, other : Optional[Sequence[float]]
        Measured costs, lower is better; None or empty for a failure.

    Returns
    -------
    lower : bool
        True when ``costs`` should replace ``other`` as the best.
    """
    if not costs:
        return False
    return not other or mean(costs) < mean(other)


def is_faster(candidate: Sequence[float], incumbent: Sequence[float], pvalue: float) -> bool:
    """Whether the ``candidate`` costs are convincingly lower than the ``incumbent`` costs.

    With at least two costs in each sample, this is a one-sided Welch t-test
    (``scipy.stats.ttest_ind(..., equal_var=False, alternative="less")``) at
    significance ``pvalue``.  With fewer (a runner that repeats once), no
    variance can be estimated and the rule is deliberately a plain comparison:
    the candidate is faster when its mean is strictly lower.  A failed
    candidate (no costs) is never faster; any successful candidate is faster
    than a failed incumbent.

    Parameters
    ----------
    candidate, incumbent : Sequence[float]
        Measured costs, lower is better.
    pvalue : float
        The significance level, in ``(0, 1]``.

    Returns
    -------
    faster : bool
        True when the candidate should replace the incumbent.
    """
    if not candidate:
        return False
    if not incumbent:
        return True
    if mean(candidate) >= mean(incumbent):
        return False
    if len(candidate) < 2 or len(incumbent) < 2:
        return True
    if _spread(candidate) == 0.0 and _spread(incumbent) == 0.0:
        # Welch's statistic is 0/0 here (scipy answers nan); equal repeats that
        # differ are as convincing as samples get.
        return True
    return welch_less_pvalue(candidate, incumbent) <= pvalue


def welch_less_pvalue(candidate: Sequence[float], incumbent: Sequence[float]) -> float:
    """The p-value of Welch's one-sided t-test that ``candidate`` has the lower mean.

    The p-value of ``scipy.stats.ttest_ind(candidate, incumbent, equal_var=False,
    alternative="less")``, from Student's t distribution function
    (``scipy.special.stdtr``): importing ``scipy.stats`` costs a tuning process
    about a second, ``scipy.special`` a quarter of that.

    Parameters
    ----------
    candidate, incumbent : Sequence[float]
        Two or more costs each, not all equal in both.

    Returns
    -------
    pvalue : float
        The probability of a t statistic this low if the means were equal.
    """
    # scipy is imported here, not at module level: the engine itself needs only
    # the standard library, and MetaSchedule's users get scipy with xgboost.
    from scipy.special import stdtr  # pylint: disable=import-outside-toplevel

    candidate_error = variance(candidate) / len(candidate)
    incumbent_error = variance(incumbent) / len(incumbent)
    error = candidate_error + incumbent_error
    statistic = (mean(candidate) - mean(incumbent)) / math.sqrt(error)
    degrees_of_freedom = error**2 / (
        candidate_error**2 / (len(candidate) - 1) + incumbent_error**2 / (len(incumbent) - 1)
    )
    return float(stdtr(degrees_of_freedom, statistic))


def _spread(values: Sequence[float]) -> float:
    return max(values) - min(values)
