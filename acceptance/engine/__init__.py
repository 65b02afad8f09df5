"""The verify pipeline of one round (docs/acceptance.md §3, without the visual stage).

:func:`verify_round`: allocate the round (never overwrite a report) → baseline (captured if none
was given) → resolve checks (a config error becomes a blocking issue) → ``git-diff-check`` first →
command checks → baseline grading (opt-in ``baselineChecks``: the same checks on the pre-work
baseline, see :mod:`..grading`) → code analysis → zero-change gate → verdict and message → repair
directives (failed rounds) → ``report-<N>.md``/``.json``. Check failures never raise; they are the
verdict. The verdict message is built by :mod:`..verdict`.

One module per step, called in this order by :mod:`.pipeline` (imports point one way, down this list):

* :mod:`.request`: the input and output of a round (:class:`VerifyRequest`, :class:`VerifyOutcome`);
* :mod:`.context`: what every step shares (:class:`~.context.RoundContext`: the round number, the
  baseline, git failures, blocking issues) and :func:`next_round`;
* :mod:`.setup`: §3.1 steps 1–4, the round opened and its checks resolved (:class:`~.setup.RoundConfig`);
* :mod:`.checks`: steps 5–6, ``git-diff-check`` and the command checks under verification integrity
  (:class:`~.checks.CheckRun`), and the baseline grading (6b);
* :mod:`.changes`: step 8, the change analysis and what the checks themselves wrote (:class:`~.changes.RoundChanges`);
* :mod:`.gates`: steps 9–10, the gates that block or fail a round whatever the checks said;
* :mod:`.outcome`: step 11, the verdict, the report files and :class:`VerifyOutcome`;
* :mod:`.pipeline`: :func:`verify_round`, the steps in order.

Plain Python: no Prefect, no adapters. The Prefect task ``verify-round-{r}`` is a thin wrapper.
"""

from __future__ import annotations

from ..verdict import NO_CHANGES_CHECK, build_message
from .checks import integrity_policy
from .context import next_round
from .pipeline import VerificationActiveError, verify_round
from .request import VerifyOutcome, VerifyRequest

__all__ = [
    "VerifyRequest",
    "VerifyOutcome",
    "VerificationActiveError",
    "verify_round",
    "next_round",
    "build_message",
    "NO_CHANGES_CHECK",
    "integrity_policy",
]
