#!/usr/bin/env python3
"""check_layers.py SOURCE_DIR [--self-test]: the include arrows of miniPipe's code run only downward.

The layer order is written here once (docs/architecture.md draws it); a file may include a file of
its own layer or of a layer below. Also checked, for every C++ file of miniapp/, kernels/, schedules/ and
util/:
  - one include root: every project include is spelled from the repository root
    ("miniapp/runtime/stage.hpp"), or names a file of the including file's own folder;
  - host-only layers never see Kokkos: no file they include, directly or through project
    headers, includes <Kokkos...> (their libraries are compiled by the host compiler in a GPU
    build, CMakeLists.txt: minipipe_host_only);
  - only the command line (tools, driver) includes CLI11.
--self-test: runs the check on a small planted tree with one of each fault and fails unless it
finds exactly those, so this test cannot pass by finding nothing.
"""
import os
import re
import sys
import tempfile

# Top to bottom. "miniapp/<folder>" for the application's layers; kernels and schedules are the
# two libraries under it (neither includes the other); util is the bottom, under both.
LAYERS = [
    "miniapp/driver",    # main.cpp: parse, initialize, dispatch to a tool
    "miniapp/tools",     # the command line of each subcommand
    "miniapp/tuning",    # the tuner's search; calibration and measured runs through launch
    "miniapp/launch",    # the run command's core: plan, train, measure, report
    "miniapp/runtime",   # stages, executor, trainer, checkpoints, profiling (device code)
    "miniapp/report",    # measurements to summaries, tables, JSON, verdicts
    "miniapp/model",     # the deck, the model's shapes, data, cost files
    "miniapp/mpi",       # bounded waits, watchdog, signal cleanup
    "miniapp/io",        # HDF5 dumps, compare, output files and paths
    "schedules",         # schedules as data (no Kokkos, no MPI)
    "kernels",           # the Kokkos kernels (no MPI, no HDF5)
    "util",              # SVG writing, the ranks' agreement on a message (no Kokkos)
]
# Compiled by the host compiler in every build: nothing they include may bring Kokkos in.
HOST_ONLY = {"miniapp/driver", "miniapp/tools", "miniapp/tuning", "miniapp/report", "miniapp/model",
             "miniapp/mpi", "miniapp/io", "schedules", "util"}
CLI_LAYERS = {"miniapp/driver", "miniapp/tools"}
# Pairs at the bottom that may not include each other although the order would allow one way.
FORBIDDEN = {("schedules", "kernels")}

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^">]+)[">]', re.M)
SOURCE_EXT = (".cpp", ".hpp", ".h")


def layer_of(rel):
    for layer in LAYERS:
        if rel.startswith(layer + "/"):
            return layer
    return None


def sources(root):
    out = []
    for top in ("miniapp", "kernels", "schedules", "util"):
        for d, _, files in os.walk(os.path.join(root, top)):
            out += [os.path.relpath(os.path.join(d, f), root) for f in files if f.endswith(SOURCE_EXT)]
    return sorted(out)


def includes(root, rel):
    with open(os.path.join(root, rel), encoding="utf-8") as f:
        return INCLUDE.findall(f.read())


def resolve(root, rel, name):
    """The repository path a quoted include names (None: not a project file)."""
    if os.path.isfile(os.path.join(root, name)) and layer_of(name):
        return name
    local = os.path.normpath(os.path.join(os.path.dirname(rel), name))
    if os.path.isfile(os.path.join(root, local)):
        return local
    return None


def check(root):
    problems = []
    files = sources(root)
    edges, kokkos = {}, set()
    for rel in files:
        edges[rel] = []
        for kind, name in includes(root, rel):
            if kind == "<":
                if name.startswith("Kokkos") or name.startswith("KokkosBlas"):
                    kokkos.add(rel)
                if name.startswith("CLI/") and layer_of(rel) not in CLI_LAYERS:
                    problems.append(f"{rel}: includes <{name}>; only {', '.join(sorted(CLI_LAYERS))} parse the command line")
                continue
            target = resolve(root, rel, name)
            if target is None:
                continue  # a system or third-party header (toml++ and the like)
            if rel.startswith("miniapp/") and name != target:
                problems.append(f'{rel}: includes "{name}"; spell it from the repository root: "{target}"')
            edges[rel].append(target)
            a, b = layer_of(rel), layer_of(target)
            if a is None or b is None or a == b:
                continue
            if LAYERS.index(b) < LAYERS.index(a) or (a, b) in FORBIDDEN:
                problems.append(f'{rel}: includes "{name}": layer {a} may not include layer {b}')
    # Kokkos reached through project headers.
    reaches = {}

    def brings_kokkos(f, seen):
        if f in reaches:
            return reaches[f]
        if f in seen:
            return None
        seen.add(f)
        if f in kokkos:
            reaches[f] = [f]
            return reaches[f]
        for t in edges.get(f, []):
            path = brings_kokkos(t, seen)
            if path:
                reaches[f] = [f] + path
                return reaches[f]
        reaches[f] = None
        return None

    for rel in files:
        if layer_of(rel) in HOST_ONLY:
            path = brings_kokkos(rel, set())
            if path:
                problems.append(f"{rel}: host-only layer {layer_of(rel)} reaches Kokkos: {' -> '.join(path)}")
    return problems, len(files)


def self_test():
    planted = {
        "miniapp/io/good.hpp": '#include "miniapp/io/other.hpp"\n',
        "miniapp/io/other.hpp": "\n",
        "miniapp/io/bad_up.cpp": '#include "miniapp/tools/tool.hpp"\n',           # io -> tools
        "miniapp/tools/tool.hpp": '#include <CLI/CLI.hpp>\n#include "miniapp/io/good.hpp"\n',
        "miniapp/model/bad_root.cpp": '#include "deck.hpp"\n',                   # second include root
        "miniapp/model/deck.hpp": "\n",
        "miniapp/model/bad_cli.cpp": "#include <CLI/CLI.hpp>\n",                # CLI11 below tools
        "miniapp/report/bad_kokkos.cpp": '#include "kernels/k.hpp"\n',  # Kokkos through a header
        "kernels/k.hpp": '#include "kernels/types.hpp"\n',
        "kernels/types.hpp": "#include <Kokkos_Core.hpp>\n",
        "schedules/bad_pair.cpp": '#include "kernels/k.hpp"\n',                 # schedules -> kernels
    }
    expected = ["miniapp/io/bad_up.cpp", "miniapp/model/bad_cli.cpp", "miniapp/model/bad_root.cpp",
                "miniapp/report/bad_kokkos.cpp", "schedules/bad_pair.cpp", "schedules/bad_pair.cpp"]
    with tempfile.TemporaryDirectory() as tmp:
        for rel, text in planted.items():
            os.makedirs(os.path.dirname(os.path.join(tmp, rel)), exist_ok=True)
            with open(os.path.join(tmp, rel), "w", encoding="utf-8") as f:
                f.write(text)
        problems, _ = check(tmp)
    found = sorted(p.split(":", 1)[0] for p in problems)
    for p in problems:
        print("planted: " + p)
    if found != sorted(expected):
        print(f"FAIL: the planted faults were {sorted(expected)}, the check found {found}")
        return 1
    print(f"PASS: the check finds each of the {len(expected)} planted faults and nothing else")
    return 0


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    if "--self-test" in sys.argv[2:]:
        return self_test()
    problems, n = check(sys.argv[1])
    for p in problems:
        print("FAIL: " + p)
    if problems:
        print("layers, top to bottom (each may include its own and those below): " + " -> ".join(LAYERS))
        return 1
    print(f"PASS: {n} files of {len(LAYERS)} layers; every include runs downward, from one root")
    return 0


if __name__ == "__main__":
    sys.exit(main())
