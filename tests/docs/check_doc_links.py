"""Every relative link in the documentation leads somewhere: README.md, docs/*.md, shaders/README.md,
models/data/README.md and bench/**/*.md are read for Markdown links `[text](target)`; a target that
is not a URL must name a tracked file or folder (relative to the document), and its `#anchor`, where
it has one, a heading of that Markdown file as GitHub spells heading anchors (lower case, punctuation
dropped, spaces to hyphens, -1, -2 for repeats) or an explicit `<a id=...>`/`<a name=...>`. Prints
each broken link with its document and line; exit 1 when any is broken.
usage: check_doc_links.py REPOSITORY"""
import os
import re
import subprocess
import sys

root = sys.argv[1] if len(sys.argv) > 1 else "."
files = subprocess.run(["git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard"],
                       capture_output=True, text=True, check=True).stdout.split()
tracked = set(files)
folders = set()
for f in files:
    parent = os.path.dirname(f)
    while parent and parent not in folders:
        folders.add(parent)
        parent = os.path.dirname(parent)
docs = [f for f in files if f.endswith(".md") and (f in ("README.md", "shaders/README.md", "models/data/README.md")
                                                   or f.startswith("docs/") or f.startswith("bench/"))]

link = re.compile(r"(?<!!)\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^()\s]+(?:\([^()\s]*\))?)(?:\s+\"[^\"]*\")?\)")
fence = re.compile(r"^\s*(```|~~~)")


def anchors_of(path):
    """The anchors GitHub gives the headings of the Markdown file at `path`, and its explicit ones."""
    found, seen, inside = set(), {}, False
    with open(os.path.join(root, path), encoding="utf-8") as handle:
        for line in handle:
            if fence.match(line):
                inside = not inside
                continue
            found.update(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", line))
            heading = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
            if inside or not heading:
                continue
            text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading.group(1))  # a link: its text
            text = re.sub(r"<[^>]+>", "", text).lower()
            slug = re.sub(r"[^\w\- ]", "", text).replace(" ", "-")
            count = seen.get(slug, 0)
            seen[slug] = count + 1
            found.add(slug if count == 0 else f"{slug}-{count}")
    return found


broken, cache, checked = [], {}, 0
for doc in docs:
    inside = False
    with open(os.path.join(root, doc), encoding="utf-8") as handle:
        lines = handle.readlines()
    for number, line in enumerate(lines, 1):
        if fence.match(line):
            inside = not inside
            continue
        if inside:
            continue
        for target in link.findall(re.sub(r"`[^`]*`", "", line)):
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
                continue
            checked += 1
            path, _, anchor = target.partition("#")
            resolved = os.path.normpath(os.path.join(os.path.dirname(doc), path)) if path else doc
            if resolved not in tracked and resolved not in folders:
                broken.append(f"{doc}:{number}: '{target}': no file or folder {resolved}")
                continue
            if anchor and resolved.endswith(".md"):
                if resolved not in cache:
                    cache[resolved] = anchors_of(resolved)
                if anchor not in cache[resolved]:
                    broken.append(f"{doc}:{number}: '{target}': {resolved} has no heading #{anchor}")
for line in broken:
    print(line)
print(f"{len(docs)} documents, {checked} relative links, {len(broken)} broken")
sys.exit(1 if broken else 0)
