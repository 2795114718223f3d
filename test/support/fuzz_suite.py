"""Schemathesis hooks of `npm test`'s fuzz run (test/api/fuzz.test.ts): the project's check, and a sample of large enums.

The coverage phase sends one positive case per value of every enum. The IANA time-zone enum (419 values, in PUT
/api/v1/team/availability's body and GET /api/v1/analytics/conversations-over-time's query) made ~840 of the run's
~7,500 cases, each the same validation and handler path with another zone. FUZZ_ENUM_SAMPLE=N keeps, per operation and
parameter, an enum's first N values and every Nth after them (N=20: all 20 scopes, 40 zones spread over the list); the
negative cases around the enum (a wrong type, a value not in it) are all kept. Unset or empty (`npm run fuzz`): every
value is sent. Zones across DST and midnight are test/unit's.
"""

import collections
import os

import schemathesis
from schemathesis.core.hooks import load_from_path

load_from_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "fuzz_checks.py"))

_SAMPLE = int(os.environ.get("FUZZ_ENUM_SAMPLE") or 0)
_seen = collections.Counter()

if _SAMPLE > 0:

    @schemathesis.hook
    def filter_case(ctx, case):
        meta = case.meta
        data = getattr(getattr(meta, "phase", None), "data", None)
        description = getattr(data, "description", None)
        if not description or not description.endswith("Enum value") or not meta.generation.mode.is_positive:
            return True
        key = (case.operation.label, getattr(data, "parameter_location", None), getattr(data, "parameter", None), description)
        index = _seen[key]
        _seen[key] += 1
        return index < _SAMPLE or index % _SAMPLE == 0
