#!/usr/bin/env python3
"""Reads the xUnit files `swift test --xunit-output` wrote and prints, as
shell assignments for scripts/test.sh: the tests run, those failed (by name),
and the slowest 15 with their seconds.

    scripts/xunit-summary.py FILE [FILE ...]
"""
import shlex
import sys
import xml.etree.ElementTree as ElementTree


def main(paths):
    cases = []
    for path in paths:
        try:
            root = ElementTree.parse(path).getroot()
        except (OSError, ElementTree.ParseError) as error:
            print(f"xunit-summary: {path}: {error}", file=sys.stderr)
            return 1
        cases.extend(root.iter("testcase"))
    failed = [
        f"{case.get('classname')}/{case.get('name')}"
        for case in cases
        if case.find("failure") is not None or case.find("error") is not None
    ]
    timed = sorted(cases, key=lambda case: -float(case.get("time") or 0))[:15]
    slowest = "\n".join(
        f"{float(case.get('time') or 0):7.1f} {case.get('classname')}/{case.get('name')}" for case in timed
    )
    print(f"xunit_total={len(cases)}")
    print(f"xunit_failed={len(failed)}")
    print(f"xunit_failed_names={shlex.quote(chr(10).join(failed))}")
    print(f"xunit_slowest={shlex.quote(slowest)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]) if len(sys.argv) > 1 else 2)
