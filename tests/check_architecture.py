"""The house rules that can be read off the tree (docs/architecture.md):
include rules between folders, no cycle between folders, one getenv under src/,
and a shared library that exports the public header's LAC_API functions and
nothing else. Usage: check_architecture.py SOURCE_DIR [LIBRARY.so]"""
import os
import re
import subprocess
import sys

src_root = sys.argv[1]
library = sys.argv[2] if len(sys.argv) > 2 else None
failures = []
CAPS = ("map", "impute", "mf")
include_re = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def below_front_end(cap, inc):
    """A header of capability cap that its backends may include: the contract
    and what the backends share below the front end (e.g. mf/schedule.h), never
    the front end's own headers (*_internal.h, *_front.h)."""
    return (inc.startswith(cap + "/") and inc.count("/") == 1
            and not inc.endswith(("_internal.h", "_front.h")))


def folder_of(path):
    return os.path.dirname(path)


def allowed(src, inc):
    """Whether file src (relative to src/) may include inc (relative to src/)."""
    if inc.startswith("lacuna/"):
        return True
    parts, target = src.split("/"), inc.split("/")
    top, ttop = parts[0], target[0]
    if top == "core":
        return ttop == "core"
    if top == "data":
        return ttop in ("core", "data")
    if top == "io":
        return ttop in ("core", "data", "io")
    if top == "dist":
        return ttop in ("core", "dist") or any(below_front_end(cap, inc) for cap in CAPS)
    if top in CAPS:
        contract = "%s/%s_backend.h" % (top, top)
        if len(parts) > 2 and parts[1] == "cpu":   # the CPU backend
            return ttop in ("core", "data") or below_front_end(top, inc) or inc.startswith(top + "/cpu/")
        if src == contract:                        # the contract itself
            return ttop in ("core", "data")
        return ttop in ("core", "data", "io", top)
    if top == "backend" and len(parts) > 2 and parts[1] == "cuda":
        if len(parts) == 3:                        # context, memory, gateway
            if ttop == "core" or inc.startswith("backend/cuda/") and inc.count("/") == 2:
                return True
            return parts[2].startswith("gateway") and bool(re.fullmatch(r"(%s)/\1_backend\.h" % "|".join(CAPS), inc))
        cap = parts[2]                             # backend/cuda/<cap>/...
        return (ttop == "core" or below_front_end(cap, inc) or inc == "backend/cuda/cuda_internal.h"
                or inc.startswith("backend/cuda/%s/" % cap))
    return True


edges = {}
getenv_files = set()
for dirpath, _, files in os.walk(src_root):
    for name in files:
        if not name.endswith((".c", ".h", ".cu", ".cuh", ".inc")):
            continue
        path = os.path.join(dirpath, name)
        rel = os.path.relpath(path, src_root)
        text = open(path, encoding="utf-8", errors="replace").read()
        if re.search(r"\bgetenv\s*\(", text):
            getenv_files.add(rel)
        for inc in include_re.findall(text):
            if not os.path.exists(os.path.join(src_root, inc)) and not inc.startswith("lacuna/"):
                continue   # a header beside the file (e.g. "cli.h") or a system one
            if not allowed(rel, inc):
                failures.append("%s includes %s (not allowed by the layer rules)" % (rel, inc))
            a, b = folder_of(rel), folder_of(inc)
            if a != b and not inc.startswith("lacuna/"):
                edges.setdefault(a, set()).add(b)

# No cycle between folders (depth-first search).
state = {}


def visit(node, stack):
    state[node] = 1
    for nxt in sorted(edges.get(node, ())):
        if state.get(nxt) == 1:
            failures.append("folder cycle: " + " -> ".join(stack + [node, nxt]))
        elif not state.get(nxt):
            visit(nxt, stack + [node])
    state[node] = 2


for node in sorted(edges):
    if not state.get(node):
        visit(node, [])

if len(getenv_files) > 1:
    failures.append("getenv appears in %d files under src/: %s" % (len(getenv_files), ", ".join(sorted(getenv_files))))

if library:
    header = ""
    for name in ("lacuna.h", "lacuna_cuda.h"):   # the public headers
        path = os.path.join(src_root, "..", "include", "lacuna", name)
        if os.path.exists(path):
            header += open(path).read()
    declared = set(re.findall(r"LAC_API\s[^;{(]*?\b(lac_[a-z0-9_]+)\s*\(", header))
    out = subprocess.run(["nm", "-D", "--defined-only", library], capture_output=True, text=True, check=True).stdout
    exported = {line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()}
    for name in sorted(exported - declared):
        failures.append("exported but not in the public header: " + name)
    for name in sorted(declared - exported):
        failures.append("declared LAC_API but not exported: " + name)
    print("exports: %d functions, header: %d LAC_API declarations" % (len(exported), len(declared)))

print("folders: %d with includes across folders; getenv in: %s" % (len(edges), ", ".join(sorted(getenv_files))))
for f in failures:
    print("FAIL: " + f)
sys.exit(1 if failures else 0)
