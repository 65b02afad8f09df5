"""acceptance layer of tianshu-mcp: how the work is judged (docs/architecture.md §2, docs/acceptance.md).

Plain Python (no Prefect, no adapters):

* :mod:`.config`    acceptance.json layers, ``split_cmd``, check resolution and derived defaults;
* :mod:`.testcount` test-command detection, zero-test detection, test counts;
* :mod:`.git`       baseline capture, change analysis, ``git-diff-check``, suspicious signals;
* :mod:`.runner`    command checks as killable process trees, output tails, verify-N.log;
* :mod:`.report`    report-N.md / report-N.json and the tool summary text;
* :mod:`.repair`    repair directives, the repair plan and the next round's feedback text;
* :mod:`.engine`    ``verify_round``: one acceptance round end to end.
"""
