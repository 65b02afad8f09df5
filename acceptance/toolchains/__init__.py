"""One module per toolchain (detection and derived checks, command recognition, test counting,
repair directives) behind one protocol (:mod:`.base`) and one registry (:mod:`.registry`); the
formats several toolchains share (TAP, JUnit XML, JSON reports) are in :mod:`.formats`.
See docs/design-notes.md, "Toolchains as plugins"."""
