"""What ``proton-broker-config`` prints: refusals, JSON, and tables of entities."""

from __future__ import annotations

import json
from typing import Any

from proton_broker.cli.client import Refused, Reply


def ok(reply: Reply) -> Reply:
    """``reply`` if the broker did it; Refused with its status and description if not."""
    if not reply.ok:
        raise Refused(f"{reply.status} {reply.description}")
    return reply


def print_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str))


def print_table(rows: list[dict[str, Any]], columns: list[tuple[str, str]], left: int = 2) -> None:
    """A table with a ruled header: ``columns`` are (title, key); the first ``left``
    columns are text (left-aligned), the rest figures (right-aligned)."""
    cells = [[title for title, _ in columns]]
    cells += [[text(row.get(key), table=True) for _, key in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    for n, line in enumerate(cells):
        print(
            "  ".join(
                c.ljust(w) if i < left or n == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(line, widths, strict=True))
            ).rstrip()
        )
        if n == 0:
            print("=" * (sum(widths) + 2 * (len(widths) - 1)))


def alternate_column(
    rows: list[dict[str, Any]], columns: list[tuple[str, str]]
) -> list[tuple[str, str]]:
    """``columns`` with ("Alternate", "alternate") after the first two if any row has an
    alternate; each row gets ``alternate``, the destination of its ``alternateBinding``."""
    for row in rows:
        binding = row.get("alternateBinding")
        row["alternate"] = binding.get("destination") if isinstance(binding, dict) else binding
    if not any(row["alternate"] for row in rows):
        return columns
    return [*columns[:2], ("Alternate", "alternate"), *columns[2:]]


def text(value: Any, table: bool = False) -> str:
    if value is None:
        return "-" if table else ""
    if isinstance(value, bool):
        return ("Y" if value else "N") if table else str(value).lower()
    if isinstance(value, (dict, list)):
        return json.dumps(value, default=str)
    return str(value)
