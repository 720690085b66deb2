#!/usr/bin/env python3
"""Code bytes of a wasm's functions by name, for docs/bundle-size.md.

Reads the code section and the `name` custom section of a wasm that kept its names (rustc's
output before wasm-bindgen and wasm-opt: target/front/wasm32-unknown-unknown/wasm-release/app.wasm
after `cargo leptos build --release --split`) and prints the total, the bytes whose mangled name
contains each of a few crate paths, and with a regular expression the largest functions matching
it. Sizes are before wasm-opt and compression: compare them with each other, not with the
bytes on the wire. (twiggy does more; this needs only python.)

    scripts/wasm-sizes.py target/front/wasm32-unknown-unknown/wasm-release/app.wasm [REGEX]
"""
import collections
import re
import sys

# Substrings of legacy-mangled names (`_ZN6chrono6format…`), each a crate or module path.
GROUPS = {
    "reactive_graph": "14reactive_graph",
    "tachys": "6tachys",
    "serde_json": "10serde_json",
    "chrono": "6chrono",
    "chrono::format": "6chrono6format",
    "core::fmt": "4core3fmt",
    "float formatting (flt2dec)": "flt2dec",
}


def leb(b, i):
    """An unsigned LEB128 at `i`: (value, index after it)."""
    value = shift = 0
    while True:
        byte = b[i]
        i += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, i


def skip_limits(b, j):
    flags = b[j]
    _, j = leb(b, j + 1)
    return leb(b, j)[1] if flags & 1 else j


def functions(data):
    """[(name, code bytes)] of every function defined in the module."""
    i, imported, bodies, names = 8, 0, [], {}
    while i < len(data):
        section = data[i]
        size, i = leb(data, i + 1)
        end = i + size
        if section == 2:  # imports: functions are numbered after the imported ones
            count, j = leb(data, i)
            for _ in range(count):
                for _ in range(2):  # module and field names
                    length, j = leb(data, j)
                    j += length
                kind = data[j]
                j += 1
                if kind == 0:
                    _, j = leb(data, j)
                    imported += 1
                elif kind == 1:
                    j = skip_limits(data, j + 1)
                elif kind == 2:
                    j = skip_limits(data, j)
                elif kind == 3:
                    j += 2
                elif kind == 4:
                    _, j = leb(data, j + 1)
        elif section == 10:  # code
            count, j = leb(data, i)
            for _ in range(count):
                length, body = leb(data, j)
                bodies.append(length + (body - j))
                j = body + length
        elif section == 0:
            length, j = leb(data, i)
            if data[j : j + length] == b"name":
                j += length
                while j < end:
                    sub = data[j]
                    sub_size, j = leb(data, j + 1)
                    sub_end = j + sub_size
                    if sub == 1:  # function names
                        count, j = leb(data, j)
                        for _ in range(count):
                            index, j = leb(data, j)
                            length, j = leb(data, j)
                            names[index] = data[j : j + length].decode("utf8", "replace")
                            j += length
                    j = sub_end
        i = end
    return [(names.get(k + imported, "?"), size) for k, size in enumerate(bodies)]


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    funcs = functions(open(sys.argv[1], "rb").read())
    print(f"{len(funcs)} functions, {sum(s for _, s in funcs)} code bytes")
    groups = collections.Counter()
    for name, size in funcs:
        for label, part in GROUPS.items():
            if part in name:
                groups[label] += size
    for label, size in groups.most_common():
        print(f"{size:>10}  {label}")
    if len(sys.argv) == 3:
        pattern = re.compile(sys.argv[2])
        matched = sorted(((s, n) for n, s in funcs if pattern.search(n)), reverse=True)
        print(f"{sum(s for s, _ in matched)} code bytes in {len(matched)} functions matching {sys.argv[2]}")
        for size, name in matched[:40]:
            print(f"{size:>10}  {name[:150]}")


if __name__ == "__main__":
    main()
