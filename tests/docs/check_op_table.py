"""The op table (core/op_table.h) against what is written about it elsewhere (issue 46 item 2): every
row's name and number in schema/graph.fbs's `enum Op`, and no other there; every op named once, with
its number, in docs/format.md's Ops table, "(plans only)" exactly on the training-only ones; the counts
of ops the documentation states (README.md, docs/*.md, shaders/README.md: "all N ops", "N graph ops",
"N training-only ops", "ops 0..N"; the docs avoid them, so that a new op changes none). With a built libtightfit.so: its op names and numbers (tf_op_count, tf_op_name) are the rows
read from the header's text, and Python's Graph.unary takes exactly the table's attribute-free float
unaries. Prints each mismatch; exit 1 when any.
usage: check_op_table.py REPOSITORY [LIBTIGHTFIT_SO]"""
import ctypes
import os
import re
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "."
library = sys.argv[2] if len(sys.argv) > 2 else None
failures = []
checks = 0


def check(condition, message):
    global checks
    checks += 1
    if not condition:
        failures.append(message)
    return condition


def read(relative):
    with open(os.path.join(root, relative), encoding="utf-8") as handle:
        return handle.read()


# ---- the rows, from the header's text ----
COLUMNS = ["id", "name", "number", "scope", "min", "max", "outputs", "shape_only", "in_place", "attrs", "shape",
           "alias", "workspace", "vjp", "cpu", "cuda", "vulkan", "dtypes", "slices", "half"]
header = read("core/op_table.h")
body = header[header.index("#define TF_OP_TABLE(X)"):]
body = re.sub(r"/\*.*?\*/", " ", body[:body.index("// clang-format on")], flags=re.S).replace("\\\n", " ")
rows = []
for match in re.finditer(r"\bX\(([^()]*)\)", body):
    tokens = [t.strip() for t in match.group(1).split(",")]
    if check(len(tokens) == len(COLUMNS), f"core/op_table.h: row {tokens[0]} has {len(tokens)} columns, not "
                                          f"{len(COLUMNS)}"):
        row = dict(zip(COLUMNS, tokens))
        row["number"] = int(row["number"])
        rows.append(row)
check(len(rows) > 0, "core/op_table.h: no rows read")
check([r["number"] for r in rows] == list(range(len(rows))), "core/op_table.h: rows not numbered 0, 1, 2, ...")
by_name = {r["name"]: r for r in rows}
graph_ops = [r for r in rows if r["scope"] == "GRAPH"]
training_ops = [r for r in rows if r["scope"] == "TRAINING"]
print(f"op table: {len(rows)} rows ({len(graph_ops)} graph ops, {len(training_ops)} training-only)")

# ---- the library's names and numbers are those rows ----
if library:
    lib = ctypes.CDLL(library)
    lib.tf_op_count.restype = ctypes.c_int32
    lib.tf_op_name.restype = ctypes.c_char_p
    lib.tf_op_name.argtypes = [ctypes.c_int]
    names = [lib.tf_op_name(op).decode() for op in range(lib.tf_op_count())]
    check(names == [r["name"] for r in rows],
          f"{library}: tf_op_name over 0..{len(names) - 1} is not the header's rows: "
          f"{sorted(set(names) ^ set(by_name))} differ")
    print(f"library: {len(names)} ops, the header's names in its order")

# ---- schema/graph.fbs: enum Op ----
schema = read("schema/graph.fbs")
enum_text = re.search(r"enum Op : \w+ \{(.*?)\n\}", schema, re.S).group(1)
enum_text = re.sub(r"//[^\n]*", "", enum_text)
schema_ops = {name: int(number) for name, number in re.findall(r"(\w+)\s*=\s*(\d+)", enum_text)}
for r in rows:
    check(schema_ops.get(r["name"]) == r["number"],
          f"schema/graph.fbs: enum Op has {r['name']} = {schema_ops.get(r['name'])}, the table {r['number']}")
for name in sorted(set(schema_ops) - set(by_name)):
    check(False, f"schema/graph.fbs: enum Op has {name} = {schema_ops[name]}, which the op table has not")
print(f"schema/graph.fbs: {len(schema_ops)} Op values")

# ---- docs/format.md: the Ops table ----
format_md = read("docs/format.md")
section = format_md[format_md.index("\n## Ops\n"):]
section = section[:section.index("\n## ", 1)] if "\n## " in section[1:] else section
named = {}
for line in section.splitlines():
    cells = [c.strip() for c in line.strip().strip("|").split("|")]
    numbers = re.fullmatch(r"(\d+)(?:\s*[–-]\s*(\d+))?", cells[0]) if line.startswith("|") else None
    if not numbers:
        continue
    first = int(numbers.group(1))
    last = int(numbers.group(2) or first)
    names = re.findall(r"`([a-z0-9_]+)`", cells[1])
    if not check(len(names) == last - first + 1,
                 f"docs/format.md: the Ops row '{cells[0]}' names {len(names)} ops for {last - first + 1} numbers"):
        continue
    plans_only = "(plans only)" in cells[1]
    for number, name in zip(range(first, last + 1), names):
        check(name not in named, f"docs/format.md: {name} has two rows in the Ops table")
        named[name] = number
        row = by_name.get(name)
        if check(row is not None, f"docs/format.md: the Ops table names {name} (#{number}), which the op table has not"):
            check(row["number"] == number, f"docs/format.md: the Ops table gives {name} #{number}, the table "
                                           f"{row['number']}")
            check(plans_only == (row["scope"] == "TRAINING"),
                  f"docs/format.md: {name} is {'' if plans_only else 'not '}marked (plans only), its scope is "
                  f"{row['scope']}")
for r in rows:
    check(r["name"] in named, f"docs/format.md: the Ops table has no row for {r['name']} (#{r['number']})")
print(f"docs/format.md: the Ops table names {len(named)} ops")

# ---- counts the documentation states ----
COUNTS = [(re.compile(r"\ball (\d+) ops\b"), len(rows), "all ops"),
          (re.compile(r"\b(\d+) graph ops\b"), len(graph_ops), "graph ops"),
          (re.compile(r"\b(\d+) training-only ops\b"), len(training_ops), "training-only ops"),
          (re.compile(r"\bops 0\.\.(\d+)"), len(rows) - 1, "the last op's number")]
documents = ["README.md", "shaders/README.md"] + sorted(
    "docs/" + f for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
stated = 0
for document in documents:
    for number, line in enumerate(read(document).splitlines(), 1):
        for pattern, expected, what in COUNTS:
            for match in pattern.finditer(line):
                stated += 1
                check(int(match.group(1)) == expected,
                      f"{document}:{number}: '{match.group(0)}' ({what}), the table has {expected}")
print(f"counts: {stated} stated in {len(documents)} documents")

# ---- Python's Graph.unary: the table's attribute-free float unaries ----
if library:
    os.environ["TIGHTFIT_LIBRARY"] = library
    sys.path.insert(0, os.path.join(root, "python"))
    import tightfit  # noqa: E402 (the library chosen first)

    unaries = {r["name"] for r in graph_ops
               if r["shape"] == "unary_float" and r["attrs"] == "NONE" and r["max"] == "1"}
    check(set(tightfit._UNARY_OPS) == unaries,
          f"python/tightfit: Graph.unary takes {sorted(tightfit._UNARY_OPS)}, the table's unaries are {sorted(unaries)}")
    check(all(tightfit._OPS[name] == by_name[name]["number"] for name in tightfit._OPS),
          "python/tightfit: an op number in _OPS is not the table's")
    print(f"python: Graph.unary takes {len(unaries)} ops")

for message in failures:
    print("mismatch: " + message)
print(f"op_table_docs: {checks - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
