"""Commands under an address-space limit (`ulimit -v`, RLIMIT_AS): refused in one line before any work
when the limit is below what the command needs, and one line when memory runs out during the work.

Without this, `albert instances` under `ulimit -v` 400 MB died of SIGABRT with nothing on stderr (a
library's allocation failed while it loaded) and left its output folder locked; under 800 MB it
printed a 138-line traceback ending in Beam's `RuntimeError: MemoryError [while running ...]`.

NEEDS_MB: the peak address space (VmPeak) each command reached on the bundled inputs, measured on
the 2-core CPU machine (docs/trust.md). Most of it is reserved by the libraries a command loads
(torch, TensorFlow, Beam, Prefect map far more than they touch), so no option lowers it; the part
that grows with the data has an option (LOWER_WITH)."""

from __future__ import annotations

import resource

from core.errors import UserError

MARGIN = 1.15  # over the measured peak: other inputs, other runners
NEEDS_MB = {"instances": 1406, "pretrain": 933, "corpus": 726, "vocab": 214}
LOWER_WITH = {
    "instances": "--group-chars (characters a worker holds tokenized at once)",
    "pretrain": "--batch-size",
    "corpus": "--max-record-bytes (the largest raw record held in memory)",
}


def limit_mb() -> int | None:
    """The soft address-space limit of this process in MiB, None when there is none."""
    soft, _hard = resource.getrlimit(resource.RLIMIT_AS)
    return None if soft == resource.RLIM_INFINITY else soft >> 20


def needs_mb(command: str) -> int | None:
    """The address space `command` is known to need (NEEDS_MB with MARGIN), None if not measured."""
    measured = NEEDS_MB.get(command)
    return None if measured is None else round(measured * MARGIN)


def check(command: str) -> None:
    """UserError, before any work (nothing loaded, nothing locked), when `ulimit -v` is below what
    `command` needs."""
    limit, need = limit_mb(), needs_mb(command)
    if limit is None or need is None or limit >= need:
        return
    lower = (
        f"; {LOWER_WITH[command]} lowers only the part that grows with the data"
        if command in LOWER_WITH
        else ""
    )
    raise UserError(
        f"the address space is limited to {limit} MiB (ulimit -v {limit << 10}), and this command needs "
        f"about {need} MiB: most of it is reserved by the libraries it loads{lower}; raise the limit "
        f"(ulimit -v {need << 10}) or remove it"
    )


def out_of_memory(command: str, err: BaseException) -> str | None:
    """The one line for a MemoryError that `err` is or wraps (Beam hands a worker's on as the text
    `MemoryError [while running 'STEP']`), None if it is none."""
    seen: list[BaseException] = []
    current: BaseException | None = err
    while current is not None and not any(current is earlier for earlier in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    step = ""
    for error in seen:
        text = str(error)
        if isinstance(error, MemoryError) or text.startswith("MemoryError"):
            if "[while running " in text:
                step = " in step " + text.split("[while running ", 1)[1].rstrip("]")
            break
    else:
        return None
    limit = limit_mb()
    where = (
        f"the address space limit of {limit} MiB (ulimit -v)" if limit is not None else "the memory available"
    )
    lower = f"lower {LOWER_WITH[command]}, or " if command in LOWER_WITH else ""
    return f"out of memory{step}: the work needed more than {where}; {lower}give it more memory"
