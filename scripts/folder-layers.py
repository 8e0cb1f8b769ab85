#!/usr/bin/env python3
"""Checks that the folders of Sources/PinProxy depend on each other without
cycles, and prints them bottom-up (docs/ARCHITECTURE.md's folder table reads
the same way). A folder depends on another when one of its files names a type
declared there. Exit status 1 names the folders of a cycle."""
import collections
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(__file__), "..", "Sources", "PinProxy")
DECLARATION = re.compile(
    r"^(?:(?:public|internal|private|fileprivate|final|indirect)\s+)*"
    r"(?:class|struct|enum|protocol|typealias|actor)\s+(\w+)", re.M)


def read_sources():
    files = {}
    for directory, _, names in os.walk(ROOT):
        for name in names:
            if name.endswith(".swift"):
                path = os.path.join(directory, name)
                with open(path, encoding="utf-8") as handle:
                    files[path] = handle.read()
    return files


def folder_of(path):
    return os.path.relpath(os.path.dirname(path), ROOT)


def dependencies(files):
    declared = {}
    for path, text in files.items():
        for match in DECLARATION.finditer(text):
            declared.setdefault(match.group(1), folder_of(path))
    names = re.compile(r"\b(" + "|".join(sorted(declared, key=len, reverse=True)) + r")\b")
    edges = collections.defaultdict(set)
    for path, text in files.items():
        here = folder_of(path)
        code = re.sub(r"//.*", "", text)
        for used in set(names.findall(code)):
            if declared[used] != here:
                edges[here].add(declared[used])
    return edges


def layers(edges):
    folders = sorted(set(edges) | {b for targets in edges.values() for b in targets})
    order, done, visiting = [], set(), []

    def visit(folder):
        if folder in done:
            return
        if folder in visiting:
            cycle = visiting[visiting.index(folder):] + [folder]
            sys.exit("folder cycle: " + " -> ".join(cycle))
        visiting.append(folder)
        for target in sorted(edges.get(folder, ())):
            visit(target)
        visiting.pop()
        done.add(folder)
        order.append(folder)

    for folder in folders:
        visit(folder)
    return order


if __name__ == "__main__":
    graph = dependencies(read_sources())
    for folder in layers(graph):
        print(f"{folder}: {', '.join(sorted(graph.get(folder, ()))) or '-'}")
