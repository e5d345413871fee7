"""The recent operational log, kept in memory for the web console's logs page.

Rules this module owns: the last ``console.log_records`` records the broker's loggers emit
at their configured level are kept, oldest dropped first (a bounded deque, safe to append
from any thread); each is read as the time, level, logger, its operational code (the
``QUE-1001`` that starts most broker log lines, docs/metrics.md) and its text.
"""

from __future__ import annotations

import logging
import re
from collections import deque
from typing import Any

_CODE = re.compile(r"^([A-Z]{3}-\d{4})\b")


class RecentLog(logging.Handler):
    """A handler that keeps the last records (attach it to the ``proton_broker`` logger)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.records: deque[dict[str, Any]] = deque(maxlen=limit)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # a bad format string: keep what was logged, unformatted
            text = str(record.msg)
        found = _CODE.match(text)
        self.records.append(
            {
                "time": record.created,
                "level": record.levelname,
                "logger": record.name,
                "code": found.group(1) if found else None,
                "message": text,
            }
        )

    def recent(self, code: str = "") -> list[dict[str, Any]]:
        """The kept records, oldest first; ``code``: only those whose code starts so."""
        kept = list(self.records)
        if not code:
            return kept
        return [r for r in kept if r["code"] is not None and r["code"].startswith(code)]
