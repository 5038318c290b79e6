#!/usr/bin/python3
"""lacuna report's JSON reader against Python's json module, line by line:
the same verdict on every line (accepted, or refused with exit 2), and for
the accepted ones the same decoded text in the page.

usage: report_reader_check.py LACUNA   (run in a scratch folder)
"""
import html
import json
import math
import subprocess
import sys

HEAD = '{"capability": "c", "unit": "u", "value": 1, "case": '
TAILS = [r'"plain"}', r'"caf\u00e9 \ud83d\ude00"}', r'"tab\tnew\nline"}', r'"q\" b\\ s\/"}', r'"\u0041"}',
         r'"x", "floor": -0.5e-3}', r'"x", "floor": 1E+2}', r'"x", "floor": -0}', r'"x", "floor": 01}',
         r'"x", "floor": .5}', r'"x", "floor": 1.}', r'"x", "floor": 1e}', r'"x", "floor": -}', r'"x", "floor": +1}',
         r'"x", "floor": 1e400}', r'"x", "floor": NaN}', r'"x", "floor": Infinity}', r'"x",}', r'"x" "floor": 1}',
         r"'x'}", r'"x"} x', r'"x"}   ', r'"x", "extra": {"a": [1, {"b": null}, "s"]}}', r'"x", "extra": [}',
         r'"x", "extra": tru}', r'"x", "extra": nul}', r'"x", "case": "y"}', '"raw\ttab"}', r'"bad \q"}',
         r'"short \u12"}', r'"x", "peer": 3}', r'"x", "peer_value": "3"}', r'"x", "floor": true}', r'""}', r'null}',
         r'"not closed}', r'"x", "value": null}', r'"x", "machine": null, "date": null, "peer": null}', r'"x"',
         r'"x", "extra": [[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]}', r'"x"}{}',
         '"bad \\\u00e9"}']   # a backslash before a UTF-8 byte: the message stays UTF-8


def reference(line):
    """Python's verdict: the case's text, or None for a line to refuse."""
    def no_constants(name):
        raise ValueError(name)

    def pairs(items):
        keys = [k for k, _ in items]
        if len(keys) != len(set(keys)):
            raise ValueError("a key given twice")
        return dict(items)

    try:
        o = json.loads(line, parse_constant=no_constants, object_pairs_hook=pairs)
    except ValueError:
        return None
    if not isinstance(o, dict):
        return None

    def number(k, required):
        v = o.get(k)
        return not required if v is None else type(v) in (int, float) and math.isfinite(v)

    def string(k, required):
        v = o.get(k)
        return not required if v is None else isinstance(v, str) and (v != "" or not required)

    ok = (string("capability", True) and string("case", True) and string("unit", True) and number("value", True)
          and number("floor", False) and number("peer_value", False) and string("peer", False)
          and string("machine", False) and string("date", False))
    return o["case"] if ok else None


def main():
    tool, bad = sys.argv[1], 0
    for i, tail in enumerate(TAILS):
        line = HEAD + tail
        with open("line.jsonl", "w") as f:
            f.write(line + "\n")
        r = subprocess.run([tool, "report", "line.jsonl", "-o", "line.html"], capture_output=True, text=True)
        want = reference(line)
        if r.returncode not in (0, 2) or (r.returncode == 0) != (want is not None):
            print("line %d %r: lacuna exit %d (%s), Python %s" % (i, tail, r.returncode, r.stderr.strip(),
                                                                  "accepts" if want is not None else "refuses"))
            bad += 1
        elif want is not None and "<td>%s</td>" % html.escape(want, quote=True) not in open("line.html").read():
            print("line %d %r: the case does not read %r" % (i, tail, want))
            bad += 1
    print("ok" if not bad else "%d disagreements" % bad)
    return 1 if bad else 0


sys.exit(main())
