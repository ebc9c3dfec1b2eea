#!/usr/bin/python3
"""Fails when the ONNX importer's stages (import/stages.txt, issue 46) are not one-way: a file of import/
that the table does not list (or a listed file that is gone), an #include of a header of a stage the
file's stage may not use, and, in the built library, a call to a function that only such a stage
defines, or a circle of calls between files (inside a stage too). The includes are read from the
sources; the calls from the objects' defined and undefined symbols (nm), as scripts/check-links does
for the layers' libraries. Usage: import_stages.py ROOT [LIBRARY.a | OBJECT.o ...]
  ROOT      the tree whose import/ and import/stages.txt are checked
  LIBRARY   the built import library (libtightfit_import.a) or its objects: without, includes only"""
import os
import re
import subprocess
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
SOURCES = (".c", ".h")


def read_table(root):
    """(stages in order: name -> the stages it may use, file -> stage) from import/stages.txt."""
    uses, stage_of, problems = {}, {}, []
    path = os.path.join(root, "import", "stages.txt")
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if line.startswith("stage "):
                name, _, used = line[len("stage "):].partition(":")
                uses[name.strip()] = set(used.split())
                continue
            fields = line.split()
            if len(fields) != 2 or fields[1] not in uses:
                problems.append(f"import/stages.txt:{number}: '{line}' is no 'FILE STAGE' of a stage declared above")
                continue
            stage_of["import/" + fields[0]] = fields[1]
    for name, used in uses.items():
        for other in sorted(used - set(uses)):
            problems.append(f"import/stages.txt: stage {name} uses '{other}', which is no stage")
    return uses, stage_of, problems


def may_use(uses, source, target):
    return source == target or target in uses[source]


def check_files(root, stage_of):
    present = {"import/" + n for n in os.listdir(os.path.join(root, "import")) if n.endswith(SOURCES)}
    problems = [f"{p} is in no stage of import/stages.txt: give it one" for p in sorted(present - set(stage_of))]
    problems += [f"import/stages.txt lists {p}, which does not exist" for p in sorted(set(stage_of) - present)]
    return problems


def check_includes(root, uses, stage_of):
    problems, count = [], 0
    for path in sorted(stage_of):
        full = os.path.join(root, path)
        if not os.path.isfile(full):
            continue
        with open(full, encoding="utf-8", errors="replace") as f:
            text = f.read()
        for included in INCLUDE.findall(text):
            target = os.path.normpath(included if included.startswith("import/") else os.path.join("import", included))
            if not target.startswith("import/") or not os.path.isfile(os.path.join(root, target)):
                continue  # another layer's header: scripts/check-layers' business
            count += 1
            source_stage, target_stage = stage_of[path], stage_of.get(target)
            if target_stage and not may_use(uses, source_stage, target_stage):
                problems.append(f"upward include: {path} ({source_stage}) includes {target} ({target_stage}): "
                                f"{source_stage} may use {', '.join(sorted(uses[source_stage])) or 'nothing else'}")
    return problems, count


def symbols(paths):
    """{source path: (defined, undefined)} from nm over archives or objects ('onnx_values.c.o' is
    import/onnx_values.c)."""
    found = {}
    for path in paths:
        out = subprocess.run(["nm", "-A", "-g", "-P", path], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            where, _, rest = line.rpartition(": ")
            fields = rest.split()
            if len(fields) < 2:
                continue
            member = re.search(r"([^/\[\]:]+?)\.o\]?$", where)
            if not member:
                continue
            name = member.group(1)
            source = "import/" + (name if name.endswith(SOURCES) else name + ".c")
            defined, undefined = found.setdefault(source, (set(), set()))
            (undefined if fields[1] == "U" else defined).add(fields[0])
    return found


def circles(edges):
    """The strongly connected components of more than one file (Tarjan), each a circle of calls."""
    index, low, stack, on_stack, result, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                result.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return result


def check_calls(root, uses, stage_of, libraries):
    found = {s: v for s, v in symbols(libraries).items() if s in stage_of}
    problems = [f"{p} has no object in {', '.join(libraries)} (not built?)" for p in sorted(stage_of)
                if p.endswith(".c") and p not in found and os.path.isfile(os.path.join(root, p))]
    defined_by = {}
    for source, (defined, _) in found.items():
        for symbol in defined:
            defined_by.setdefault(symbol, set()).add(source)
    edges, calls = {}, 0
    for source, (_, undefined) in sorted(found.items()):
        for symbol in sorted(undefined):
            for owner in sorted(defined_by.get(symbol, set()) - {source}):
                calls += 1
                edges.setdefault(source, set()).add(owner)
                source_stage, owner_stage = stage_of[source], stage_of[owner]
                if not may_use(uses, source_stage, owner_stage):
                    problems.append(f"upward call: {source} ({source_stage}) calls {symbol}, defined in {owner} "
                                    f"({owner_stage}): {source_stage} may use "
                                    f"{', '.join(sorted(uses[source_stage])) or 'nothing else'}")
    for component in circles(edges):
        problems.append("a circle of calls: " + " <-> ".join(component) + " (each reaches the others)")
    return problems, calls, len(found)


def main(argv):
    if not argv:
        sys.exit(__doc__)
    root, libraries = argv[0], argv[1:]
    uses, stage_of, problems = read_table(root)
    problems += check_files(root, stage_of)
    include_problems, includes = check_includes(root, uses, stage_of)
    problems += include_problems
    summary = f"{len(uses)} stages, {len(stage_of)} files, {includes} includes inside import/"
    if libraries:
        call_problems, calls, objects = check_calls(root, uses, stage_of, libraries)
        problems += call_problems
        summary += f", {calls} calls between its {objects} objects"
    for line in problems:
        print(line)
    print(f"import_stages: {summary}; {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
