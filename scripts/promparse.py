#!/usr/bin/env python3
"""Strict parser and validator for Prometheus text exposition format 0.0.4.

Stricter than Prometheus itself where our exposition must be clean (promtool-lint style):
  - every family has exactly one HELP and one TYPE line, both before its first sample;
  - a family's lines are one contiguous group; no family is declared twice;
  - TYPE is counter, gauge, histogram, summary or untyped;
  - sample names belong to their family (histogram: _bucket/_sum/_count; summary: the name,
    _sum/_count); every sample follows a declared family;
  - metric and label names are valid, label values use only the \\\\ \\" \\n escapes,
    no label is repeated in a sample, names starting with "__" are reserved;
  - values (and optional timestamps) parse; counters are >= 0 and named *_total;
  - no duplicate series (name + label set);
  - histograms: each child has buckets with le="+Inf", cumulative counts never decrease,
    _count equals the +Inf bucket, _sum is present; le appears on _bucket samples only;
  - summaries: quantile labels in [0, 1], _sum and _count present;
  - the text ends with a newline.

Use from Python:  families = promparse.parse(text)  (raises PromParseError)
                  promparse.value(families, "nxdns_queries_total", proto="udp")
From a shell:     promparse.py FILE|-   exits 0, or 1 with "promparse: line N: message".
"""

import math
import re
import sys

NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")
LABEL_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
FLOAT_RE = re.compile(r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|Inf|inf|NaN)")
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")
SUFFIXES = {
    "counter": ("",),
    "gauge": ("",),
    "untyped": ("",),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("", "_sum", "_count"),
}


class PromParseError(Exception):
    def __init__(self, line, message):
        super().__init__(f"line {line}: {message}" if line else message)
        self.line = line


class Family:
    def __init__(self, name, line):
        self.name = name
        self.line = line
        self.help = None
        self.type = None
        self.samples = []  # (sample name, labels dict, float value, line)

    def __repr__(self):
        return f"Family({self.name!r}, {self.type!r}, {len(self.samples)} samples)"


def parse_float(s, line, what):
    if not FLOAT_RE.fullmatch(s):
        raise PromParseError(line, f"{what} {s!r} is not a number")
    return float(s)


def unescape_help(s, line):
    out = []
    i = 0
    while i < len(s):
        c = s[i]
        if c == "\\":
            if i + 1 >= len(s) or s[i + 1] not in "\\n":
                raise PromParseError(line, "invalid escape in HELP (only \\\\ and \\n)")
            out.append("\\" if s[i + 1] == "\\" else "\n")
            i += 2
        else:
            out.append(c)
            i += 1
    return "".join(out)


def parse_labels(s, pos, line):
    """Parse from just after '{'; returns (labels dict, position after '}')."""
    labels = {}
    while True:
        if pos < len(s) and s[pos] == "}":
            return labels, pos + 1
        m = LABEL_RE.match(s, pos)
        if not m:
            raise PromParseError(line, f"bad label name at column {pos + 1}")
        key = m.group(0)
        if key.startswith("__"):
            raise PromParseError(line, f"label name {key!r} is reserved")
        if key in labels:
            raise PromParseError(line, f"label {key!r} repeated")
        pos = m.end()
        if s[pos:pos + 2] != '="':
            raise PromParseError(line, f"expected =\" after label {key!r}")
        pos += 2
        val = []
        while True:
            if pos >= len(s):
                raise PromParseError(line, f"unterminated value of label {key!r}")
            c = s[pos]
            if c == '"':
                pos += 1
                break
            if c == "\\":
                nxt = s[pos + 1:pos + 2]
                if nxt not in ("\\", '"', "n"):
                    raise PromParseError(line, f"invalid escape \\{nxt} in label {key!r}")
                val.append("\n" if nxt == "n" else nxt)
                pos += 2
                continue
            if c == "\n":
                raise PromParseError(line, "raw newline in label value")
            val.append(c)
            pos += 1
        labels[key] = "".join(val)
        if pos < len(s) and s[pos] == ",":
            pos += 1
        elif pos < len(s) and s[pos] == "}":
            continue
        else:
            raise PromParseError(line, "expected , or } after a label")


def family_of(name, families_by_name):
    """The declared family a sample name belongs to, or None."""
    for fname, suffixes in ((name, ("",)),
                            (name[:-7] if name.endswith("_bucket") else None, ("_bucket",)),
                            (name[:-4] if name.endswith("_sum") else None, ("_sum",)),
                            (name[:-6] if name.endswith("_count") else None, ("_count",))):
        if fname is None:
            continue
        fam = families_by_name.get(fname)
        if fam and fam.type and suffixes[0] in SUFFIXES[fam.type]:
            return fam
    return None


def parse(text):
    if text and not text.endswith("\n"):
        raise PromParseError(None, "exposition does not end with a newline")
    families = {}
    order = []
    current = None
    series = set()
    for lineno, raw in enumerate(text.split("\n")[:-1] if text else [], start=1):
        if raw.strip() == "":
            continue
        if raw.startswith("#"):
            parts = raw.split(" ", 3)
            if len(parts) >= 3 and parts[0] == "#" and parts[1] in ("HELP", "TYPE"):
                kind, name = parts[1], parts[2]
                rest = parts[3] if len(parts) > 3 else ""
                if not NAME_RE.fullmatch(name):
                    raise PromParseError(lineno, f"bad metric name {name!r} in {kind}")
                fam = families.get(name)
                if fam is None:
                    fam = Family(name, lineno)
                    families[name] = fam
                    order.append(fam)
                elif fam is not current:
                    raise PromParseError(lineno, f"family {name!r} declared again "
                                                 f"(first at line {fam.line})")
                if fam.samples:
                    raise PromParseError(lineno, f"{kind} for {name!r} after its samples")
                if kind == "HELP":
                    if fam.help is not None:
                        raise PromParseError(lineno, f"second HELP for {name!r}")
                    fam.help = unescape_help(rest, lineno)
                else:
                    if fam.type is not None:
                        raise PromParseError(lineno, f"second TYPE for {name!r}")
                    if rest not in TYPES:
                        raise PromParseError(lineno, f"invalid TYPE {rest!r} for {name!r}")
                    fam.type = rest
                    if rest == "counter" and not name.endswith("_total"):
                        raise PromParseError(lineno, f"counter {name!r} does not end in _total")
                current = fam
            continue  # other comments are allowed
        m = NAME_RE.match(raw)
        if not m:
            raise PromParseError(lineno, "sample line does not start with a metric name")
        name = m.group(0)
        pos = m.end()
        labels = {}
        if pos < len(raw) and raw[pos] == "{":
            labels, pos = parse_labels(raw, pos + 1, lineno)
        if pos >= len(raw) or raw[pos] != " ":
            raise PromParseError(lineno, "expected a space before the value")
        fields = raw[pos + 1:].split(" ")
        if len(fields) not in (1, 2) or "" in fields:
            raise PromParseError(lineno, "expected 'value [timestamp]' after the labels")
        value = parse_float(fields[0], lineno, "value")
        if len(fields) == 2 and not re.fullmatch(r"-?\d+", fields[1]):
            raise PromParseError(lineno, f"timestamp {fields[1]!r} is not an integer")
        fam = family_of(name, families)
        if fam is None:
            raise PromParseError(lineno, f"sample {name!r} has no HELP/TYPE before it")
        if fam is not current:
            raise PromParseError(lineno, f"sample {name!r} is not in its family's group "
                                         f"(family {fam.name!r} declared at line {fam.line})")
        if fam.help is None:
            raise PromParseError(lineno, f"family {fam.name!r} has no HELP")
        if fam.type is None:
            raise PromParseError(lineno, f"family {fam.name!r} has no TYPE")
        key = (name, tuple(sorted(labels.items())))
        if key in series:
            raise PromParseError(lineno, f"duplicate series {name}{labels}")
        series.add(key)
        if fam.type == "counter" and (math.isnan(value) or value < 0):
            raise PromParseError(lineno, f"counter {name!r} has value {fields[0]}")
        is_bucket = fam.type == "histogram" and name.endswith("_bucket")
        if ("le" in labels) != is_bucket and fam.type == "histogram":
            raise PromParseError(lineno, "le must be on histogram _bucket samples only")
        if fam.type != "histogram" and "le" in labels:
            raise PromParseError(lineno, f"le label on non-histogram {name!r}")
        if fam.type == "summary":
            if (name == fam.name) != ("quantile" in labels):
                raise PromParseError(lineno, "quantile label must be on summary quantiles only")
            if "quantile" in labels:
                q = parse_float(labels["quantile"], lineno, "quantile")
                if not 0 <= q <= 1:
                    raise PromParseError(lineno, f"quantile {q} outside [0, 1]")
        fam.samples.append((name, labels, value, lineno))
    for fam in order:
        if fam.help is None:
            raise PromParseError(fam.line, f"family {fam.name!r} has no HELP")
        if fam.type is None:
            raise PromParseError(fam.line, f"family {fam.name!r} has no TYPE")
        if fam.type == "histogram":
            check_histogram(fam)
        elif fam.type == "summary":
            check_summary(fam)
    return families


def child_key(labels, drop):
    return tuple(sorted((k, v) for k, v in labels.items() if k != drop))


def check_histogram(fam):
    children = {}
    for name, labels, value, line in fam.samples:
        suffix = name[len(fam.name):]
        c = children.setdefault(child_key(labels, "le"), {"buckets": [], "line": line})
        if suffix == "_bucket":
            le = parse_float(labels["le"], line, "le")
            c["buckets"].append((le, value, line))
        else:
            c[suffix] = value
    for key, c in children.items():
        where = f"histogram {fam.name}{dict(key)}"
        if not c["buckets"]:
            raise PromParseError(c["line"], f"{where} has no _bucket samples")
        b = sorted(c["buckets"])
        if b[-1][0] != math.inf:
            raise PromParseError(c["line"], f"{where} has no le=\"+Inf\" bucket")
        for (le0, v0, _), (le1, v1, line1) in zip(b, b[1:]):
            if le0 == le1:
                raise PromParseError(line1, f"{where} repeats le={le1}")
            if v1 < v0:
                raise PromParseError(line1, f"{where} bucket le={le1} is below le={le0}")
        if "_count" not in c or "_sum" not in c:
            raise PromParseError(c["line"], f"{where} lacks _sum or _count")
        if c["_count"] != b[-1][1]:
            raise PromParseError(c["line"], f"{where} _count {c['_count']} != +Inf bucket "
                                            f"{b[-1][1]}")


def check_summary(fam):
    children = {}
    for name, labels, value, line in fam.samples:
        c = children.setdefault(child_key(labels, "quantile"), {"line": line})
        c[name[len(fam.name):]] = value
    for key, c in children.items():
        if "_count" not in c or "_sum" not in c:
            raise PromParseError(c["line"], f"summary {fam.name}{dict(key)} lacks _sum or _count")


def value(families, sample_name, **labels):
    """The value of one series (labels must match exactly), or None when absent."""
    fam = family_of(sample_name, families)
    if fam is None:
        return None
    for name, lab, v, _ in fam.samples:
        if name == sample_name and lab == labels:
            return v
    return None


def main(argv):
    if len(argv) != 2:
        print("usage: promparse.py FILE|-", file=sys.stderr)
        return 2
    try:
        if argv[1] == "-":
            text = sys.stdin.read()
        else:
            with open(argv[1], encoding="utf-8") as f:
                text = f.read()
        families = parse(text)
    except (PromParseError, OSError, UnicodeDecodeError) as e:
        print(f"promparse: {argv[1]}: {e}", file=sys.stderr)
        return 1
    n = sum(len(f.samples) for f in families.values())
    print(f"promparse: {argv[1]}: ok, {len(families)} families, {n} samples")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
