#!/usr/bin/env python3
"""Whitespace fixers for pre-commit's local hooks (standard library only, so no hook repository is cloned).

    python3 scripts/whitespace.py trailing FILE...   strip spaces and tabs at the ends of lines
    python3 scripts/whitespace.py eof FILE...        end a non-empty file with exactly one newline

Files are rewritten in place; each one changed is named, and the exit status is 1 when any was (pre-commit then
reports the hook as failed, as its own fixers do). Files that are not UTF-8 text, or that hold a NUL byte, are left
alone. Line endings (LF, CRLF) are kept.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

TRAILING = re.compile(rb"[ \t]+(?=\r?\n|\Z)")


def is_text(data: bytes) -> bool:
    if b"\0" in data:
        return False
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def strip_trailing(data: bytes) -> bytes:
    return TRAILING.sub(b"", data)


def fix_eof(data: bytes) -> bytes:
    body = data.rstrip(b"\r\n")
    if not body:
        return b""  # empty, or only newlines
    return body + (b"\r\n" if data.endswith(b"\r\n") else b"\n")


FIXERS = {"trailing": strip_trailing, "eof": fix_eof}


def main(argv: list[str]) -> int:
    if len(argv) < 1 or argv[0] not in FIXERS:
        print(f"usage: whitespace.py {{{'|'.join(FIXERS)}}} FILE...", file=sys.stderr)
        return 2
    fix = FIXERS[argv[0]]
    changed = 0
    for name in argv[1:]:
        path = Path(name)
        data = path.read_bytes()
        if not is_text(data):
            continue
        fixed = fix(data)
        if fixed != data:
            path.write_bytes(fixed)
            print(f"fixed {name}")
            changed += 1
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
