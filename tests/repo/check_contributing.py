#!/usr/bin/env python3
"""check_contributing.py SOURCE_DIR [--self-test]: CONTRIBUTING.md's recipes list the files the tree needs.

Each recipe is a block between `<!-- recipe: TITLE; example: TOKEN [TOKEN...]; name: NAME -->` and
`<!-- end recipe -->`; its backquoted paths, with `<name>` read as NAME, are the files that recipe
touches. For each recipe:
  - every listed file exists;
  - every source file of the tree (C++, CMake, scripts, decks, test data; not docs/ and not SVG) that
    contains one of the example's tokens (case-insensitive) is listed.
So the recipe fails when a file joins or leaves what adding that kind of thing takes.
--self-test: runs the check on a planted tree with one missing and one unlisted file, and fails
unless it finds exactly those two.
"""
import os
import re
import sys
import tempfile

RECIPE = re.compile(r"<!-- recipe: ([^;]+); example: ([^;]+); name: (\S+) -->(.*?)<!-- end recipe -->", re.S)
PATH = re.compile(r"`([A-Za-z0-9_.<>-]+/[A-Za-z0-9_./<>-]+\.[A-Za-z0-9]+|README\.md)`")
SCANNED = (".cpp", ".hpp", ".h", ".txt", ".cmake", ".sh", ".py", ".toml", ".csv")
SKIP_DIRS = {".git", "docs", "spack"}


def source_files(root):
    for d, dirs, files in os.walk(root):
        rel_dir = os.path.relpath(d, root)
        dirs[:] = [x for x in dirs if x not in SKIP_DIRS and not x.startswith("build")]
        for f in files:
            rel = os.path.normpath(os.path.join(rel_dir, f))
            if f.endswith(SCANNED) or rel == "README.md":
                yield rel


def check(root):
    text = open(os.path.join(root, "CONTRIBUTING.md"), encoding="utf-8").read()
    recipes = RECIPE.findall(text)
    problems = []
    if not recipes:
        problems.append("CONTRIBUTING.md: no recipe blocks")
    files = list(source_files(root))
    for title, example, name, body in recipes:
        listed = {p.replace("<name>", name) for p in PATH.findall(body)}
        for p in sorted(listed):
            if not os.path.isfile(os.path.join(root, p)):
                problems.append(f"recipe '{title}': lists {p}, which is not in the tree")
        tokens = [t.lower() for t in example.split()]
        for rel in files:
            if rel in listed or rel == "CONTRIBUTING.md":
                continue
            try:
                content = open(os.path.join(root, rel), encoding="utf-8", errors="replace").read().lower()
            except OSError:
                continue
            if any(t in content for t in tokens):
                problems.append(f"recipe '{title}': {rel} names its example ({example.strip()}) but is not listed")
    return problems, len(recipes)


def self_test():
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "schedules"))
        open(os.path.join(root, "CONTRIBUTING.md"), "w").write(
            "<!-- recipe: thing; example: widget; name: widget -->\n"
            "- `schedules/<name>.cpp`\n- `schedules/gone.cpp`\n<!-- end recipe -->\n")
        open(os.path.join(root, "schedules", "widget.cpp"), "w").write("// widget\n")
        open(os.path.join(root, "schedules", "other.cpp"), "w").write("// uses Widget too\n")
        problems, _ = check(root)
        want = ["recipe 'thing': lists schedules/gone.cpp, which is not in the tree",
                "recipe 'thing': schedules/other.cpp names its example (widget) but is not listed"]
        if sorted(problems) != sorted(want):
            print("FAIL: self-test found", problems)
            return 1
    print("PASS: the check finds a missing and an unlisted file")
    return 0


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    if "--self-test" in sys.argv[2:]:
        return self_test()
    problems, n = check(sys.argv[1])
    for p in problems:
        print("FAIL:", p)
    if not problems:
        print(f"PASS: {n} recipes match the tree")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
