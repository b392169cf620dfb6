"""The manual (README.md, docs/pages/*.md) as the tests read it: its text,
where they find the examples they run, and its fenced code blocks, each
with the HTML comment right before it: `<!-- example: NAME -->` (run by
tests/project/test_docs_examples.py), `<!-- KIND example: NAME -->` (run by
the test file of that kind) or `<!-- not run: REASON -->`.

And how a transcript (`$ command` lines, then what it printed) is held
against what the command prints: `...` alone on a line stands for lines
left out, `…` in a line for text left out, and a JSON object with `...`
among its members for members left out.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
PAGES = ROOT / "docs" / "pages"
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)\s*$")
MARK = re.compile(r"^\s*<!--\s*(.*?)\s*-->\s*$")


@dataclass(frozen=True)
class Block:
    page: str  # README.md or docs/pages/NAME.md
    line: int  # of the opening fence, from 1
    lang: str  # the fence's info string ("" for none)
    text: str  # the block's lines, the fence's indentation taken off
    mark: str | None  # the HTML comment on the line before the fence

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def manual_files() -> list[Path]:
    return [ROOT / "README.md", *sorted(PAGES.glob("*.md"))]


def blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if m is None:
            i += 1
            continue
        indent, fence, lang = m.groups()
        end = i + 1
        while end < len(lines) and lines[end].strip() != fence:
            end += 1
        body = [
            ln[len(indent) :] if ln.startswith(indent) else ln.lstrip() for ln in lines[i + 1 : end]
        ]
        before = MARK.match(lines[i - 1]) if i else None
        found.append(
            Block(
                str(path.relative_to(ROOT)),
                i + 1,
                lang,
                "\n".join(body) + "\n",
                before.group(1) if before else None,
            )
        )
        i = end + 1
    return found


def all_blocks() -> list[Block]:
    return [b for path in manual_files() for b in blocks(path)]


def marked(name: str, kind: str = "") -> Block:
    """The one block marked `<!-- KIND example: NAME -->`."""
    want = f"{kind} example: {name}".strip()
    found = [b for b in all_blocks() if b.mark == want]
    assert len(found) == 1, f"{len(found)} blocks marked <!-- {want} -->"
    return found[0]


# --- transcripts ---


@dataclass(frozen=True)
class Step:
    command: str  # as typed after `$ `, continuation lines joined
    printed: list[str]  # what the manual says it printed


def transcript(text: str) -> list[Step]:
    """`$ command` steps and the lines after each (blank lines dropped)."""
    steps: list[Step] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("$ "):
            assert not line.strip(), f"a transcript starts with `$ `, not {line!r}"
            i += 1
            continue
        command = line[2:]
        while command.endswith("\\"):
            i += 1
            command += "\n" + lines[i]  # bash reads the backslash-newline
        i += 1
        printed: list[str] = []
        while i < len(lines) and not lines[i].startswith("$ "):
            if lines[i].strip():
                printed.append(lines[i])
            i += 1
        steps.append(Step(command, _join_json(printed)))
    return steps


def _join_json(lines: list[str]) -> list[str]:
    """A JSON object the manual wraps over several lines, as one line."""
    joined: list[str] = []
    for line in lines:
        if joined and joined[-1].lstrip().startswith("{") and _depth(joined[-1]) > 0:
            joined[-1] += " " + line.strip()
        else:
            joined.append(line)
    return joined


def _depth(text: str) -> int:
    depth, quoted, escaped = 0, False, False
    for ch in text:
        if quoted:
            escaped, quoted = (not escaped and ch == "\\"), quoted and (escaped or ch != '"')
        elif ch == '"':
            quoted = True
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
    return depth


ELIDED = re.compile(r"\s*(?:\.\.\.|…)\s*,\s*|,\s*(?:\.\.\.|…)\s*(?=[}\]])")


def _doc_json(line: str) -> tuple[Any, bool] | None:
    """The manual's JSON line as a value, and whether members were left out."""
    text = line.strip()
    if not text.startswith("{"):
        return None
    cut = ELIDED.sub("", text)
    try:
        return json.loads(cut), cut != text
    except ValueError:
        return None


def _within(doc: Any, got: Any, partial: bool) -> bool:
    """doc is got, or (partial) got with members of objects left out."""
    if isinstance(doc, dict):
        return (
            isinstance(got, dict)
            and (partial or doc.keys() == got.keys())
            and all(k in got and _within(v, got[k], partial) for k, v in doc.items())
        )
    if isinstance(doc, list):
        return (
            isinstance(got, list)
            and len(doc) == len(got)
            and all(_within(d, g, partial) for d, g in zip(doc, got))
        )
    return bool(doc == got)


def line_matches(doc: str, got: str) -> bool:
    as_json = _doc_json(doc)
    if as_json is not None:
        try:
            value = json.loads(got)
        except ValueError:
            return False
        return _within(as_json[0], value, as_json[1])
    squash = " ".join(doc.split())
    pattern = ".*".join(re.escape(part) for part in squash.split("…"))
    return re.fullmatch(pattern, " ".join(got.split())) is not None


def printed_as_documented(doc: list[str], got: list[str]) -> str | None:
    """None when got is what the manual shows, else what differs."""
    got = [g for g in got if g.strip()]
    at = 0
    skipping = False
    for want in doc:
        if want.strip() in ("...", "…"):
            skipping = True
            continue
        if skipping:
            while at < len(got) and not line_matches(want, got[at]):
                at += 1
        if at >= len(got) or not line_matches(want, got[at]):
            shown = got[at] if at < len(got) else "(nothing more)"
            return f"the manual says\n  {want}\nthe command printed\n  {shown}"
        at += 1
        skipping = False
    if not skipping and at < len(got):
        return f"the command printed more than the manual shows: {got[at]!r}"
    return None


# --- the manual's text, whole ---


def manual() -> str:
    """README.md then every page, one text (a marker is found wherever it lives)."""
    parts = [(ROOT / "README.md").read_text(encoding="utf-8")]
    parts += [p.read_text(encoding="utf-8") for p in sorted(PAGES.glob("*.md"))]
    return "\n".join(parts)
