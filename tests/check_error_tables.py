#!/usr/bin/env python3
"""check_error_tables.py SRL_H SRL_PHP PY_INIT [SRL_FFI_H] - the bindings'
copies of srl.h's tables agree with include/srl.h: the error table with
SRL_ERRNO_MAP, the one list, and php/srl_ffi.h's enums with srl.h's.

What each copy must hold, exactly (the same names, the same values, nothing
more, nothing less):
  - php/Srl.php, class SrlError: `public const NAME = CODE;` for every
    XX(NAME, CODE, ...) of the map (PHP constants cannot be generated from
    the header at run time, so this test is what keeps them true);
  - python/srl/__init__.py, _CLASSES: a class for every code but OK, keyed
    "SRL_NAME".
  - php/srl_ffi.h (given): every `typedef enum NAME {...} NAME;` has
    exactly the members and values of srl.h's enum NAME (FFI reads no
    macros, so the file repeats them; tests/e2e/ffi_layout.sh checks the
    structs' layout, which an enum's missing member does not change).
python/srlmodule.c's code_names[] is generated from the map by the C
preprocessor, so it cannot drift.  Exit 0 when they agree, 1 with one line
per difference saying which file to fix and how, 2 when a file cannot be
read or parsed.
"""
import re
import sys


def fail(msg):
    print("check_error_tables: " + msg, file=sys.stderr)
    sys.exit(2)


def header_map(path):
    text = open(path, encoding="utf-8").read()
    m = re.search(r"#define SRL_ERRNO_MAP\(XX\)((?:.*\\\n)*.*\n)", text)
    if m is None:
        fail("%s: no #define SRL_ERRNO_MAP(XX)" % path)
    codes = [(n, int(c)) for n, c in re.findall(r"XX\((\w+),\s*(-?\d+),", m.group(1))]
    if not codes:
        fail("%s: SRL_ERRNO_MAP lists no XX(name, code, message)" % path)
    return codes


def php_consts(path):
    text = open(path, encoding="utf-8").read()
    m = re.search(r"final class SrlError\s*\{(.*?)\n\}", text, re.S)
    if m is None:
        fail("%s: no class SrlError" % path)
    return [(n, int(c)) for n, c in re.findall(r"public const (\w+) = (-?\d+);", m.group(1))]


def py_classes(path):
    text = open(path, encoding="utf-8").read()
    m = re.search(r"_CLASSES = \{(.*?)\n\}", text, re.S)
    if m is None:
        fail("%s: no _CLASSES = {...}" % path)
    return re.findall(r'"(SRL_\w+)":', m.group(1))


def enums(path):
    text = open(path, encoding="utf-8").read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    out = {}
    for name, body, name2 in re.findall(r"typedef enum (\w+) \{(.*?)\} (\w+);", text, re.S):
        out[name] = [(m, int(v)) for m, v in re.findall(r"(\w+)\s*=\s*(-?\d+)", body)]
    return out


def check_ffi(srl_h, ffi_h, problems):
    want = enums(srl_h)
    for name, members in enums(ffi_h).items():
        if name not in want:
            problems.append("%s: enum %s is not in srl.h: remove it" % (ffi_h, name))
        elif members != want[name]:
            problems.append("%s: enum %s is {%s}, srl.h says {%s}: copy srl.h's members" %
                            (ffi_h, name, ", ".join("%s = %d" % m for m in members),
                             ", ".join("%s = %d" % m for m in want[name])))


def main():
    if len(sys.argv) not in (4, 5):
        fail("usage: check_error_tables.py SRL_H SRL_PHP PY_INIT [SRL_FFI_H]")
    srl_h, srl_php, py_init = sys.argv[1:4]
    want = header_map(srl_h)
    problems = []

    have = php_consts(srl_php)
    hv = dict(have)
    for name, code in want:
        if name not in hv:
            problems.append("%s: SrlError has no %s (srl.h: SRL_%s = %d): add "
                            "`public const %s = %d;`" % (srl_php, name, name, code, name, code))
        elif hv[name] != code:
            problems.append("%s: SrlError::%s is %d, srl.h says SRL_%s = %d" %
                            (srl_php, name, hv[name], name, code))
    wv = dict(want)
    for name, code in have:
        if name not in wv:
            problems.append("%s: SrlError::%s = %d is not in srl.h's SRL_ERRNO_MAP: "
                            "remove it" % (srl_php, name, code))
    if [n for n, _ in have] != [n for n, _ in want if n in hv] + [n for n, _ in have if n not in wv]:
        problems.append("%s: SrlError lists the codes out of srl.h's order" % srl_php)

    names = py_classes(py_init)
    want_py = ["SRL_" + n for n, c in want if c != 0]
    for n in want_py:
        if n not in names:
            problems.append("%s: _CLASSES has no \"%s\": add it with its exception "
                            "class's name" % (py_init, n))
    for n in names:
        if n not in want_py:
            problems.append("%s: _CLASSES has \"%s\", which srl.h's SRL_ERRNO_MAP does "
                            "not list: remove it" % (py_init, n))

    if len(sys.argv) == 5:
        check_ffi(srl_h, sys.argv[4], problems)

    for p in problems:
        print(p)
    if problems:
        return 1
    print("error tables agree with SRL_ERRNO_MAP: %d codes (php SrlError, python _CLASSES)%s"
          % (len(want), "; srl_ffi.h's enums with srl.h's" if len(sys.argv) == 5 else ""))
    return 0


sys.exit(main())
