"""Claims: ``{{ assert A < B }}`` (<, >, <=, >=) renders nothing and holds only if the spreads are
separated, not the medians:

- where A and B were timed in the same interleaved rounds (both summaries of one result keep their
  per-round ``rounds``), the per-round difference A - B must be below 0 up to its 90th percentile
  (nearest rank) in every process;
- otherwise the whole range of A must lie below the whole range of B: A's 90th percentile (the
  largest over its processes) under B's 10th (the smallest). A literal is exact.

A claim must rest on a measurement: one side at least is a value, and a literal is a finite number
(``assert A < inf`` or ``assert 1 < 2`` claims nothing and is refused).

On the reference set a claim that does not hold stops the build; on any other set the page marks it,
and every other set's verdict rides on the mark (``data-hw-fails``) for hardware.js. A set decides a
claim only on its own measurements: where it lacks an operand, the claim is missing there, not
decided on the reference's numbers. ``check`` is the public interface (scripts/claims.py).
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass
from pathlib import Path

from coursekit import results as store
from coursekit import stats
from coursekit.page import values
from coursekit.page.context import Gap, MissingValue, Page, PageContext, PlaceholderError
from coursekit.page.grammar import parse_value, placeholders

CLAIM = re.compile(r"(.+?)\s*(<=|>=|<|>)\s*(.+)")


@dataclass
class Interval:
    """What a claim compares: the range a measurement can be said to take."""

    lo: float
    hi: float
    text: str


@dataclass
class Verdict:
    """A claim decided on one set: ``holds`` is None where the set lacks what it needs (``shown`` says what)."""

    holds: bool | None
    shown: str


def parse(ctx: PageContext, body: str, placeholder: str) -> tuple[str, str, str]:
    """(A, operator, B), refusing a claim that is not written right or claims nothing."""
    m = CLAIM.fullmatch(body)
    if not m:
        ctx.fail(placeholder, "an assert is written {{ assert A < B }} (<, >, <=, >=)")
    a, op, b = m[1].strip(), m[2], m[3].strip()
    literals = []
    for side in (a, b):
        if parse_value(side):
            continue
        try:
            x = float(side)
        except ValueError:
            ctx.fail(placeholder, f"{side!r} is neither module/snippet:field nor a number")
        if not math.isfinite(x):
            ctx.fail(placeholder, f"{side!r} is no bound: a claim against an infinite number claims nothing")
        literals.append(side)
    if len(literals) == 2:
        ctx.fail(placeholder, "a claim compares a measurement: at least one side must be module/snippet:field")
    return a, op, b


def interval(ctx: PageContext, ref: str, placeholder: str) -> Interval:
    """The range an operand can take: a literal is exact; a summary spans its 10th to 90th
    percentiles over every process; a plain number, its values over the processes."""
    v = parse_value(ref)
    if v is None:
        x = float(ref)
        return Interval(x, x, ref)
    if v.fmt:
        ctx.fail(placeholder, f"{ref!r}: an operand of a claim takes no format")
    if v.field.endswith(".median"):
        ctx.fail(placeholder, f"{ref}: a claim compares spreads, not medians; name the summary itself")
    found = values.find(ctx, v.key, v.field, placeholder)
    vals = ctx.across_processes(found.doc, v.field, placeholder)
    if any(store.is_summary(x) and x["n"] < 3 for x in vals):
        ctx.fail(placeholder, f"{ref} has fewer than 3 samples: too few for a claim to rest on its spread")
    if all(store.is_summary(x) for x in vals):
        lo, hi = min(x["p10"] for x in vals), max(x["p90"] for x in vals)
    elif all(store.is_number(x) for x in vals):
        lo, hi = min(vals), max(vals)
    else:
        ctx.fail(placeholder, f"{ref} is not a number or a timing summary")
    shown = f"{lo:.4g}" if lo == hi else f"[{lo:.4g}, {hi:.4g}]"
    return Interval(lo, hi, f"{ref.split(':')[-1]} = {shown}")


def paired(ctx: PageContext, a_ref: str, b_ref: str, placeholder: str) -> list[list[float]] | None:
    """Per-round differences A - B, one list per process, where A and B were timed in the same
    interleaved rounds; else None. Two summaries count as one interleaved run only if both keep
    ``rounds`` of one length and their paths differ in exactly one dict key (the variant):
    ``step_us.eager`` and ``step_us.model_only``; never two items of a list (two sizes of a sweep,
    each timed by its own call)."""
    va, vb = parse_value(a_ref), parse_value(b_ref)
    if not (va and vb) or va.key != vb.key:
        return None
    try:
        pa, pb = store.split_path(va.field), store.split_path(vb.field)
    except KeyError:
        return None
    differ = [(x, y) for x, y in zip(pa, pb) if x != y]
    if len(pa) != len(pb) or len(differ) != 1 or differ[0][0][1] is not None or differ[0][1][1] is not None:
        return None
    fa, fb = values.find(ctx, va.key, va.field, placeholder), values.find(ctx, vb.key, vb.field, placeholder)
    if "derived_from" in fa.doc or fa.doc is not fb.doc:
        return None
    xs = ctx.across_processes(fa.doc, va.field, placeholder)
    ys = ctx.across_processes(fb.doc, vb.field, placeholder)
    diffs = []
    for x, y in zip(xs, ys):
        rx, ry = (v.get("rounds") if isinstance(v, dict) else None for v in (x, y))
        if not rx or not ry or len(rx) != len(ry):
            return None
        diffs.append([p - q for p, q in zip(rx, ry)])
    return diffs


def verdict(ctx: PageContext, body: str, placeholder: str) -> tuple[bool, str]:
    """Whether a claim holds on the context's set, and the numbers it was decided on."""
    a, op, b = parse(ctx, body, placeholder)
    diffs = paired(ctx, a, b, placeholder)
    if diffs is not None:
        hi = max(stats.percentile(sorted(d), 0.9) for d in diffs)
        lo = min(stats.percentile(sorted(d), 0.1) for d in diffs)
        holds = {"<": hi < 0, "<=": hi <= 0, ">": lo > 0, ">=": lo >= 0}[op]
        return holds, f"per-round {a.split(':')[-1]} - {b.split(':')[-1]} in [{lo:.4g}, {hi:.4g}] (p10-p90)"
    x, y = interval(ctx, a, placeholder), interval(ctx, b, placeholder)
    holds = {"<": x.hi < y.lo, "<=": x.hi <= y.lo, ">": x.lo > y.hi, ">=": x.lo >= y.hi}[op]
    return holds, f"{x.text} {op} {y.text}"


def decide(ctx: PageContext, body: str, placeholder: str) -> Verdict:
    """The claim on the context's set, decided on that set's own measurements only: where an operand
    is missing there (or only the reference has it), the verdict says so instead."""
    parse(ctx, body, placeholder)  # a claim written wrong is an error on every set, never a gap
    here = ctx.on(ctx.hardware, quiet=True)
    try:
        holds, shown = verdict(here, body, placeholder)
    except (Gap, MissingValue) as exc:
        return Verdict(None, f"missing on {ctx.hardware}: {exc}")
    if here.borrowed:
        return Verdict(None, f"not measured on {ctx.hardware} (an operand exists only on the reference set): {shown}")
    return Verdict(holds, shown)


def claim(ctx: PageContext, body: str, placeholder: str) -> str:
    """``{{ assert A < B }}`` on the page: nothing, or a mark where a set's data do not bear it out."""
    if ctx.hardware == store.REFERENCE_HARDWARE:
        holds, shown = verdict(ctx, body, placeholder)
        if not holds:
            ctx.fail(
                placeholder,
                f"the prose claims this, but the measured spreads overlap or reverse: {shown}: "
                "re-read the paragraph against the numbers, and reword or drop the claim",
            )
        fails_here = False
    else:
        fails_here = decide(ctx, body, placeholder).holds is False
    fails = [ctx.hardware] if fails_here else []
    fails += [hw for hw in ctx.page.other_sets if decide(ctx.on(hw, quiet=False), body, placeholder).holds is False]
    if not fails:
        return ""
    ctx.page.switchable += 1
    text = (
        f"[on {html.escape(ctx.hardware)} the measurement does not bear out the claim next to this mark]"
        if fails_here
        else ""  # hardware.js writes it when the reader selects a set it fails on
    )
    return ctx.page.stash(
        f'<span class="claim-fails" data-hw-fails="{html.escape(" ".join(fails))}" '
        f'title="{html.escape(body)}"{"" if fails_here else " hidden"}>{text}</span>'
    )


@dataclass
class Checked:
    """One claim of one page, checked: where it is, what it says, and the verdict (or the error)."""

    page: Path
    line: int
    body: str
    verdict: Verdict | None
    error: str | None = None


def check(page: Path, hardware: str, results_dir: Path, snippets_dir: Path, docs_dir: Path) -> list[Checked]:
    """Every claim of one page (outside code fences) decided on ``hardware``'s own measurements."""
    text = Path(page).read_text()
    ctx = PageContext(Page(None, Path(results_dir), Path(snippets_dir), Path(docs_dir), source=Path(page)), hardware)
    out = []
    for n, m in placeholders(text):
        head, _, rest = m["body"].partition(" ")
        if head != "assert":
            continue
        ctx.page.line = n
        try:
            out.append(Checked(Path(page), n, rest.strip(), decide(ctx, rest.strip(), m.group(0))))
        except (PlaceholderError, store.ResultError) as exc:
            out.append(Checked(Path(page), n, rest.strip(), None, str(exc)))
    return out
