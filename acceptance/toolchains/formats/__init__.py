"""Output formats shared by several toolchains, one module per format (docs/toolchains.md).

Each module's doc says what it reads; for example :mod:`.junit` reads JUnit XML reports
(Surefire, Gradle, pytest ``--junitxml``, jest-junit, go-junit-report, cargo-nextest, CTest,
PHPUnit, ExUnit, …) safely with ``defusedxml``.

The registry (:mod:`..registry`) skips this package: a format is not a toolchain; toolchains
and the engines import what they need from here. Plain Python, no I/O beyond what a module's
doc says.
"""
