"""The layers of tightfit and what each may use (shared/DESIGN.md, "Layout"), read by
scripts/check-layers (includes) and scripts/check-links (symbols of the per-layer libraries)."""

# The layers and what each may use (DESIGN.md's table, closed under "uses").
MAY_USE = {
    "common": set(),
    "core": {"common"},
    "schema": {"core", "common"},
    "graph": {"schema", "core", "common"},
    "plan": {"schema", "core", "common"},
    "targets": {"core", "common"},
    "compiler": {"graph", "plan", "targets", "schema", "core", "common"},
    "kernels": {"core", "common"},
    "backends": {"kernels", "plan", "targets", "schema", "core", "common"},
    "runtime": {"backends", "kernels", "plan", "targets", "schema", "core", "common"},
    "import": {"graph", "runtime", "backends", "kernels", "plan", "targets", "schema", "core", "common"},
    "tools": None,  # tools/, models/: the top, may use anything
}
