"""Baseline-aware grading (SWE-bench's FAIL_TO_PASS / PASS_TO_PASS), opt-in.

* :mod:`.grade` — the grading of one verification round against the baseline runs;
* :mod:`.ids` — the test ids a check's output reports;
* :mod:`.state` — the baseline state captured before the agent starts;
* :mod:`.baseline_runs` — the checks run on the pre-work tree.
"""
