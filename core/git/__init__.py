"""git, asked one way: the hardened runner every layer uses, and the git work tianshu-mcp does itself.

* :mod:`.run` — :func:`~.run.run_git` (argv only, stdin at EOF, own session, output to temp files,
  a timeout that kills the whole group, scrubbed environment) and :class:`~.run.GitFailed`, which
  quotes git's own words. No other module starts a ``git`` process.
* :mod:`.worktree` — one worktree per task (isolation ``worktree``): open, commit, close, sweep, merge.
* :mod:`.remote_clone` — the clone a remote task works in: sync, resolve the ref, push the result.
"""

from .run import GitFailed, GitResult, git_failed, is_git_repo, resolve_commit, run_git

__all__ = ["GitFailed", "GitResult", "git_failed", "is_git_repo", "resolve_commit", "run_git"]
