"""Every operational log code the source emits is in the table of docs/metrics.md, and the
table names no code the source does not have: operators grep for these codes, and a code
without a row is one they cannot look up."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CODE = re.compile(r"\b(?:ACL|BND|BRK|CHN|CON|EXH|HTP|MST|QUE)-1\d{3}\b")
ROW = re.compile(r"^\|\s*`(?P<code>[A-Z]{3}-\d{4})`")


def source_codes() -> set[str]:
    found: set[str] = set()
    for path in (REPO / "proton_broker").rglob("*.py"):
        found.update(CODE.findall(path.read_text(encoding="utf-8")))
    return found


def documented_codes() -> set[str]:
    lines = (REPO / "docs" / "metrics.md").read_text(encoding="utf-8").splitlines()
    return {m.group("code") for m in map(ROW.match, lines) if m is not None}


def test_the_source_emits_log_codes() -> None:
    assert {"CON-1001", "MST-1001", "QUE-1003"} <= source_codes()


def test_every_log_code_in_the_source_has_a_row_in_the_metrics_page_and_no_other() -> None:
    source, documented = source_codes(), documented_codes()
    assert source == documented, (
        f"missing from docs/metrics.md: {sorted(source - documented)}; "
        f"not in the source: {sorted(documented - source)}"
    )
