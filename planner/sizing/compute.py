"""``compute_plan``: a plan with its advice. The advice re-plans alternatives and searches the catalog, so
this module sits above ``plan``, ``advice`` and ``search`` and none of them imports it."""

from __future__ import annotations

import collections
import dataclasses
import functools
import threading
from dataclasses import dataclass

from .advice import AdviceRow, advise
from .catalog import catalog_gpus
from .errors import SizingInputError
from .inputs import PlanInputs
from .plan import Plan, build_plan
from .search import search_configurations


def _replan(inputs: PlanInputs) -> Plan | None:
    try:
        return build_plan(inputs, table=False)
    except SizingInputError:
        return None


def compute_plan(inputs: PlanInputs, *, advice: bool = True) -> Plan:
    """Size ``inputs``: KV cache per GPU, blocks, concurrency, fit, speed estimates and advice.

    ``advice=False`` skips the advice (and its catalog search) for callers that only need the figures,
    such as a list of many scenarios.

    ``concurrency`` counts requests across the deployment; with ``gpu_count`` above ``tp x pp`` the
    replicas split it, and block counts, the concurrency table and TPOT are per replica.
    Raises ``SizingInputError`` naming every bad input field.
    """
    plan = build_plan(inputs)
    if plan.meets_sla or not advice:
        return plan
    return dataclasses.replace(plan, advice=_advice_for(inputs, plan))


# Advice re-plans the alternatives and searches the catalog; the same question asked again (a form
# re-rendered, a tool polling the API) gets the same answer, so keep recent ones. PlanInputs is frozen
# and hashable; the plan follows from the inputs, so it needs no place in the key.
@dataclass(frozen=True)
class CacheInfo:
    hits: int
    misses: int
    maxsize: int
    currsize: int


class _AdviceCache:
    """An LRU of advice by inputs that, on a miss, advises on the plan the caller already has."""

    def __init__(self, maxsize: int) -> None:
        self.maxsize = maxsize
        self._rows: collections.OrderedDict[PlanInputs, tuple[AdviceRow, ...]] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._hits = self._misses = 0

    def get(self, inputs: PlanInputs, plan: Plan) -> tuple[AdviceRow, ...]:
        with self._lock:
            rows = self._rows.get(inputs)
            if rows is not None:
                self._rows.move_to_end(inputs)
                self._hits += 1
                return rows
            self._misses += 1
        rows = _advise(inputs, plan)
        with self._lock:
            self._rows[inputs] = rows
            if len(self._rows) > self.maxsize:
                self._rows.popitem(last=False)
        return rows

    def cache_clear(self) -> None:
        with self._lock:
            self._rows.clear()
            self._hits = self._misses = 0

    def cache_info(self) -> CacheInfo:
        with self._lock:
            return CacheInfo(self._hits, self._misses, self.maxsize, len(self._rows))


_advice_cached = _AdviceCache(maxsize=256)


def _advice_for(inputs: PlanInputs, plan: Plan) -> tuple[AdviceRow, ...]:
    try:
        return _advice_cached.get(inputs, plan)
    except TypeError:  # an unhashable field (a caller's own subclass, say): compute without the cache
        return _advise(inputs, plan)


def _advise(inputs: PlanInputs, plan: Plan) -> tuple[AdviceRow, ...]:
    return tuple(
        advise(
            plan,
            requested=inputs,
            replan=_replan,
            search=functools.partial(search_configurations, limit=1),  # the advice names the cheapest only
            gpus=tuple(catalog_gpus().values()),
        )
    )
