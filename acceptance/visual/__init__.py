"""Visual acceptance (docs/visual.md): screenshots of the project's pages in headless Chromium compared
with approved baselines, image specifications, and a delegated content judge.

One concept per module: :mod:`.errors` (coded failures), :mod:`.config` (the ``visual`` block),
:mod:`.decode` (images in, budgets), :mod:`.compare` (pixel gate, regions, SSIM), :mod:`.capture`
(Playwright on Debian's Chromium), :mod:`.services` (page servers), :mod:`.content` (the judge
command), :mod:`.images` (image rules), :mod:`.baselines` (prepare/approve), :mod:`.snapshot`
(integrity), :mod:`.locks` (cross-process locks), :mod:`.engine` (one round's visual stage),
:mod:`.report` (markdown and HTML sections).

Plain Python: no Prefect, no adapters (acceptance never imports adapters).
"""
