"""Tensors a learner's code wrote: compared with the expected ones, and where a kernel went
wrong, drawn program by program (the ``where:`` line of a missed case). Needs torch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from pagedlab.attention.ops import reference_attention
from pagedlab.grade.cases import Case
from pagedlab.grade.kernel_drivers import SENTINEL
from pagedlab.ground.checks import ceil_div


def tensors_equal(expected: Any, got: Any) -> bool:
    return (
        isinstance(got, torch.Tensor)
        and tuple(got.shape) == tuple(expected.shape)
        and torch.allclose(got.float(), expected.float(), rtol=1e-4, atol=1e-5)
    )


def copy_where(fn: Callable[..., Any], case: Case) -> str:
    """Which offsets the kernel stored to wrongly, program by program (read off ``out``)."""
    _x, n, block = case.args
    got = fn(*case.args)
    wrong = [i for i in range(len(got)) if not _same(float(got[i]), float(case.expected[i]))]
    if not wrong:
        return ""
    by_program: dict[int, list[int]] = {}
    for i in wrong:
        by_program.setdefault(i // block, []).append(i)
    parts = [
        f"program {p} stored wrongly at offsets {offs}"
        + (f" (past n={n}: it must not store there)" if min(offs) >= n else "")
        for p, offs in sorted(by_program.items())
    ]
    return "; ".join(parts) + "\n" + draw_copy(got, case.expected, n, block)


PAD = " " * 12  # a drawing's lines sit under the text of the ``where:`` line


def draw_copy(got: Any, expected: Any, n: int, block: int) -> str:
    """What each program stored at each of its offsets, one row per program of the launch.

    ``=`` the right value, ``x`` a wrong value, ``.`` not stored (and it should have been),
    ``!`` stored past n (it must not), blank: past n and untouched (right). Offsets past the
    launch's last program get a row of their own if anything was stored there.
    """

    def mark(i: int) -> str:
        g, e = float(got[i]), float(expected[i])
        if i >= n:
            return " " if g == SENTINEL else "!"
        if _same(g, e):
            return "="
        return "." if g == SENTINEL else "x"

    programs = ceil_div(n, block)
    rows = [f"{PAD}offset     " + "".join(str(i % 10) for i in range(programs * block))]
    for p in range(programs):
        lanes = "".join(mark(i) for i in range(p * block, (p + 1) * block))
        rows.append(f"{PAD}program {p:<3}" + " " * (p * block) + lanes)
    beyond = "".join(mark(i) for i in range(programs * block, len(got)))
    if beyond.strip():
        rows.append(f"{PAD}no program " + " " * (programs * block) + beyond)
    rows.append(
        f"{PAD}(row p: the offsets program p handles; = right  x wrong value  . not stored  "
        f"! stored past n={n})"
    )
    return "\n".join(row.rstrip() for row in rows)


def gather_where(fn: Callable[..., Any], case: Case) -> str:
    """For each wrong row of ``out``, which row of ``x`` it holds (rows compared by value)."""
    x, index = case.args
    got = fn(*case.args)
    d = x.shape[1]
    lines = []
    for i, want in enumerate(index):
        row = got[i]
        if bool(torch.equal(row, x[want])):
            continue
        held = [r for r in range(x.shape[0]) if bool(torch.equal(row, x[r]))]
        what = f"x's row {held[0]}" if held else f"values {row.tolist()[: min(d, 4)]} ..."
        lines.append(f"program {i} stored {what}, expected x's row {want}")
    return "; ".join(lines) + ("\n" + draw_gather(got, x, index) if lines else "")


def draw_gather(got: Any, x: Any, index: list[int]) -> str:
    """Which row of ``x`` each program copied into its row of out, against the one to copy.

    ``o`` the row it copied, and the right one; ``*`` the row it should have copied; ``#``
    the row it copied instead; a program whose row holds no row of x is said in words.
    """
    rows = [f"{PAD}x's row    " + " ".join(str(r % 10) for r in range(x.shape[0]))]
    for i, want in enumerate(index):
        held = [r for r in range(x.shape[0]) if bool(torch.equal(got[i], x[r]))]
        marks = [" "] * x.shape[0]
        marks[want] = "*"
        for r in held[:1]:
            marks[r] = "o" if r == want else "#"
        tail = "" if held else "   (its row holds no row of x)"
        rows.append(f"{PAD}program {i:<3}" + " ".join(marks) + tail)
    rows.append(f"{PAD}(o copied the right row  * the row to copy  # the row it copied)")
    return "\n".join(row.rstrip() for row in rows)


def softmax_where(fn: Callable[..., Any], case: Case) -> str:
    """Which slots' weights are wrong, and whether any is NaN."""
    n = case.args[2]
    got = fn(*case.args)
    bad = [t for t in range(len(got)) if not _same(float(got[t]), float(case.expected[t]))]
    if not bad:
        return ""
    nan = [t for t in bad if got[t] != got[t]]
    text = f"wrong weights at slots {bad} (slots {n}.. hold no key)"
    text += f"; NaN at slots {nan}" if nan else ""
    marks = "".join("N" if t in nan else ("x" if t in bad else "=") for t in range(len(got)))
    return (
        f"{text}\n{PAD}slot       " + "".join(str(t % 10) for t in range(len(got)))
        + f"\n{PAD}weight     {marks}\n{PAD}key        " + "k" * n + "-" * (len(got) - n)
        + f"\n{PAD}(= right  x wrong  N NaN; k a key, - no key)"
    )  # fmt: skip


def _same(a: float, b: float) -> bool:
    return a == b or abs(a - b) <= 1e-5 + 1e-4 * abs(b)


def masked_equal(expected: Any, got: Any) -> bool:
    """Equal, NaN nowhere, and every sentinel the kernel must not touch still there."""
    return tensors_equal(expected, got) and not bool(torch.isnan(got).any())


def paged_where(fn: Any, case: Case) -> str:
    """Which sequence and head differ, and the first block whose fold goes wrong (facts only:
    the case's why says what it tests)."""
    query, key, value, tables, seq_lens = case.args
    got = fn(*case.args)
    bad = ~torch.isclose(got, case.expected, rtol=1e-4, atol=1e-4).all(dim=-1)
    if not bool(bad.any()):
        return ""
    seq, head = (int(x) for x in bad.nonzero()[0])
    block_size, n = key.shape[1], int(seq_lens[seq])
    text = (
        f"sequence {seq}, head {head} (of {int(bad.sum())} wrong (sequence, head) pairs): "
        f"expected {_vec(case.expected[seq, head])}, got {_vec(got[seq, head])}"
    )
    if bool(torch.isnan(got[seq, head]).any()):
        text += " (NaN)"
    pages = ceil_div(n, block_size)
    for k in range(1, pages + 1):
        cut = min(k * block_size, n)
        lens = torch.tensor([cut], dtype=torch.int32)
        args = (query[seq : seq + 1], key, value, tables[seq : seq + 1], lens)
        mine, right = fn(*args)[0, head], reference_attention(*args)[0, head]
        if not torch.allclose(mine, right, rtol=1e-4, atol=1e-4):
            physical, filled = int(tables[seq, k - 1]), cut - (k - 1) * block_size
            cut_at = f"after its first {k - 1} it is right" if k > 1 else "it is its first"
            text += (
                f"\n            cut after {k} block(s) it is wrong, {cut_at}: logical block "
                f"{k - 1} (physical {physical}, {filled} of {block_size} slots hold tokens) is the "
                "first that goes wrong."
            )
            break
    return text


def _vec(t: torch.Tensor) -> str:
    more = ", ..." if t.numel() > 8 else ""
    return "[" + ", ".join(f"{x:.4f}" for x in t.tolist()[:8]) + more + "]"
