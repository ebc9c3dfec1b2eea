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

# Symbols a layer's library must not need although its layer may use their owner: the compiler's
# graph never goes through the schema's FlatBuffers on its way to a plan (shared/DESIGN.md's stages:
# tf_compile copies the IR with tf_ir_copy), so it calls none of the graph layer's (de)serialisers.
# Read by scripts/check-links.
MUST_NOT_NEED = {
    "compiler": {"tf_graph_serialize", "tf_graph_parse", "tf_graph_load", "tf_graph_save"},
}
