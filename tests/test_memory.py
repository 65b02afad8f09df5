"""Free heap memory goes back to the system (``core/memory.py``, design note 75)."""

from __future__ import annotations

import subprocess
import sys

# Many 4 KiB blocks (the C allocator's, not pymalloc's), one in a hundred kept: the free space
# lies between live blocks, where glibc's own trimming at the top of the heap never reaches.
PROBE = r"""
import psutil
from tianshu_mcp.core.memory import release_free_memory

blocks = [bytes(4096) for _ in range(60_000)]
kept = blocks[::100]
del blocks
before = psutil.Process().memory_info().rss
released = release_free_memory()
after = psutil.Process().memory_info().rss
print(released, (before - after) // 2**20)
"""


def test_free_blocks_between_live_ones_are_given_back() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    released, mib = out.stdout.split()
    assert released == "True"
    assert int(mib) >= 100, f"only {mib} MiB of ≈230 MiB freed went back"
