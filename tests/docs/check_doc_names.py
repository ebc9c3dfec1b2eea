"""Every `tf_` name the documentation mentions exists in the code (issue 46): README.md, docs/*.md,
shaders/README.md and models/data/README.md are read for identifiers starting `tf_` (or `TF_`), and
each must occur in a tracked source file (C, C++, CUDA, GLSL, Python, CMake, shell). A name written
as a pattern (`tf_cpu_<op>_f32`, `tf_shape_*`) is checked by its fixed part. Prints each missing name
with the documents that mention it; exit 1 when any is missing.
usage: check_doc_names.py REPOSITORY"""
import os
import re
import subprocess
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "."
files = subprocess.run(["git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard"], capture_output=True, text=True, check=True).stdout.split()
docs = [f for f in files if f.endswith(".md") and (f.startswith("docs/") or f in ("README.md", "shaders/README.md"))]
code_suffixes = (".c", ".h", ".cc", ".cu", ".cuh", ".py", ".glsl", ".comp", ".sh", ".txt", ".cmake", ".fbs", ".map",
                 ".in")
code = ""
for f in files:
    if f.endswith(code_suffixes) or f.startswith("scripts/") or f.startswith(".ci/"):
        try:
            with open(os.path.join(root, f), encoding="utf-8", errors="replace") as handle:
                code += handle.read() + "\n"
        except (IsADirectoryError, FileNotFoundError):
            pass
name = re.compile(r"\b(?:tf|TF)_[A-Za-z0-9_]*(?:<[^>\s]*>|\*)?[A-Za-z0-9_]*")
mentioned = {}
for f in docs:
    with open(os.path.join(root, f), encoding="utf-8") as handle:
        for token in name.findall(handle.read()):
            mentioned.setdefault(token, set()).add(f)
# Names the code makes with a macro: each CPU kernel is compiled as tf_cpu_<op>_f32 and _f64 from
# TF_REAL_NAME(tf_cpu_<op>) or DEFINE_UNARY(<op>, ...) (kernels/cpu/real.h): the op's name is looked for.
generated = [(re.compile(r"^tf_cpu_(\w+)_f(32|64)$"), r"\1")]
missing = []
for token, where in sorted(mentioned.items()):
    token_in_code = token
    for pattern, source in generated:
        token_in_code = pattern.sub(source, token_in_code)
    fixed = re.split(r"<[^>]*>|\*", token_in_code)[0].rstrip("_")
    if token_in_code != token:
        fixed = token = token_in_code  # the op's name, as a whole word
    if len(fixed) <= 3:
        continue  # "tf_" alone: the prefix itself
    if not re.search(r"\b" + re.escape(fixed) + (r"\b" if fixed == token else ""), code):
        missing.append((token, sorted(where)))
for token, where in missing:
    print(f"missing: {token} (in {', '.join(where)})")
print(f"doc_names: {len(mentioned) - len(missing)} passed, {len(missing)} failed")
sys.exit(1 if missing else 0)
