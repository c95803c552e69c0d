"""The engine's build: pinned sources and toolchain, our C glue, the export list (build.py)."""
