"""Verification integrity: the agent must not be able to grade itself (docs/integrity.md).

The verdict of a round comes from evidence the agent could not have shaped:

* :mod:`.infra` says which files are *test infrastructure* (test files, runner configs, the
  ``package.json`` scripts a check runs, preload files), from every toolchain's declaration;
* :mod:`.pristine` builds the **pristine tree**: the baseline's test infrastructure with the
  agent's other changes on top, in a throwaway worktree, and runs the round's checks there;
* :mod:`.inventory` compares the tests that ran at the baseline with those that ran after;
* :mod:`.targets` matches the tests a brief or ``targetTests`` names;
* :mod:`.flakes` re-runs failing checks to name flaky tests without laundering a red;
* :mod:`.holdout` runs checks the agent never sees;
* :mod:`.awareness` finds production code that detects it is under test;
* :mod:`.claims` compares the agent's final message with what was measured (advisory);
* :mod:`.judge` puts it together for :mod:`..engine`.

Plain Python: no Prefect, no adapters. The design is in ``docs/design-notes.md`` (note 50).
"""
