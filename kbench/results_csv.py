"""The results CSV on disk: rows appended as they exist, read back as dicts of text (Result.to_row makes a row;
summary.py and api.read_results give the columns their types)."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path


def append_row(path: Path, row: dict) -> None:
    """Append one row, writing the header first; a file with other columns is rewritten with the union.

    Each append opens, writes and closes the file, so a crash or Ctrl-C leaves a valid CSV.
    Lists (raw timing samples) are stored as JSON text.
    """
    row = {name: json.dumps(value) if isinstance(value, list) else value for name, value in row.items()}
    path.parent.mkdir(parents=True, exist_ok=True)
    header = _read_header(path)
    if header is None:
        _write_rows(path, list(row), [row])
    elif header == list(row):
        with path.open("a", newline="") as handle:
            csv.DictWriter(handle, fieldnames=header).writerow(row)
    else:
        with path.open(newline="") as handle:
            existing = list(csv.DictReader(handle))
        union = header + [name for name in row if name not in header]
        _write_rows(path, union, existing + [row])


def read_rows(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _read_header(path: Path) -> list[str] | None:
    if not path.exists() or path.stat().st_size == 0:
        return None
    with path.open(newline="") as handle:
        return next(csv.reader(handle), None)


def _write_rows(path: Path, header: list[str], rows: list[dict]) -> None:
    temporary = path.with_suffix(path.suffix + ".tmp")
    with temporary.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=header, restval="")
        writer.writeheader()
        writer.writerows(rows)
    os.replace(temporary, path)
