"""The fetch time: the clock, or SOURCE_DATE_EPOCH when it is set.

`fetched_at` and the raw parts' date folder come from it, so two builds of the same sources on fresh
artifacts roots give different bytes unless the time is fixed; the reproducible-builds convention
(https://reproducible-builds.org/specs/source-date-epoch/) fixes it with SOURCE_DATE_EPOCH, seconds since
1970-01-01 UTC.
"""

from __future__ import annotations

import datetime as dt
import os

from corpus_dagster.core.errors import ConfigError

SOURCE_DATE_EPOCH = "SOURCE_DATE_EPOCH"


def fetch_time() -> dt.datetime:
    """Now in UTC, or the time SOURCE_DATE_EPOCH names (a whole number of seconds, not negative)."""
    value = os.environ.get(SOURCE_DATE_EPOCH, "").strip()
    if not value:
        return dt.datetime.now(dt.UTC)
    if not value.isdigit():
        raise ConfigError(SOURCE_DATE_EPOCH, [f"{SOURCE_DATE_EPOCH}={value!r}: expected whole seconds since "
                                              "1970-01-01 UTC, e.g. 1765065600"])
    return dt.datetime.fromtimestamp(int(value), dt.UTC)
