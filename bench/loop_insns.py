#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Counts the instructions and memory loads of one iteration of the loop in
FUNCTION of an ELF file (x86-64, aarch64, 32-bit Arm or riscv64), as
objdump disassembles it:
from the loop head (the lowest target of a backward branch) to the first
branch back to it, following unconditional forward branches and taking no
conditional branch (the fast path). Prints that path, then the counts.

Usage: loop_insns.py ELF FUNCTION
       loop_insns.py --same ELF FUNCTION1 FUNCTION2
The ELF should be linked (a shared object will do), so that branches to
other sections (an abort handler) show their real targets. The target is a
port of include/pcpu/arch/, and what this script needs of it (its objdump,
which instructions branch, jump and load) it reads from the port's header
(tests/arch_headers.py); environment OBJDUMP overrides the objdump.
bench/instructions.md has the commands.

--same compares two whole functions instead (the C++ wrappers of
bench/insn_loops.cpp against the C loops beside them): their instructions,
with branch targets taken relative to each function's start and
PC-relative displacements left out, must be the same sequence, the cold
paths included; prints each loop's count and a diff, exits 1 if they
differ.
"""
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))
import arch_headers  # noqa: E402


def disassemble(path, func):
    """(port, [(address, mnemonic, operands)]) of FUNCTION."""
    port = arch_headers.by_elf(path)
    if port is None:
        sys.exit("%s: not an ELF file of a port of include/pcpu/arch/" % path)
    out = subprocess.run([port.tool("objdump"), "-d", "--no-show-raw-insn", "--disassemble=" + func,
                          path], check=True, capture_output=True, text=True).stdout
    insns = []
    for line in out.splitlines():
        m = re.match(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$", line)
        if m:
            insns.append((int(m.group(1), 16), m.group(2), port.operands(m.group(3))))
    return port, insns


def target(ops):
    """A direct branch's target address, or None."""
    m = re.search(r"(?:^|[ ,])([0-9a-f]+)\s*<[^>]*>$", ops)
    return int(m.group(1), 16) if m else None


def main(path, func, quiet=False):
    port, insns = disassemble(path, func)
    index = {a: i for i, (a, _, _) in enumerate(insns)}
    back = [t for a, mn, ops in insns if port.is_branch(mn, ops)
            for t in [target(ops)] if t is not None and t < a and t in index]
    if not back:
        sys.exit("no loop in " + func)
    head = min(back)  # the outermost loop
    i, n, nloads = index[head], 0, 0
    while True:
        a, mnemonic, ops = insns[i]
        n += 1
        nloads += 1 if port.reads_memory(mnemonic, ops) else 0
        if not quiet:
            print("  %x: %s %s" % (a, mnemonic, ops))
        t = target(ops)
        if port.is_branch(mnemonic, ops) and t == head:
            break
        i = index[t] if port.is_jump(mnemonic, ops) and t is not None else i + 1
    print("%s %s: %d instructions, %d loads per iteration" % (path, func, n, nloads))


def normalized(path, func):
    """FUNCTION's instructions as text, branch targets relative to its start,
    PC-relative displacements (data and call addresses) replaced by X."""
    _, insns = disassemble(path, func)
    if not insns:
        sys.exit("no function " + func)
    start = insns[0][0]
    out = []
    for a, mnemonic, ops in insns:
        t = target(ops)
        ops = re.sub(r"<[^>]*>", "", ops)
        if t is not None and start <= t <= insns[-1][0]:
            ops = re.sub(r"\b[0-9a-f]+\s*$", "+%x" % (t - start), ops.strip())
        elif t is not None:
            ops = re.sub(r"\b[0-9a-f]+\s*$", "EXTERN", ops.strip())
        ops = re.sub(r"-?0x[0-9a-f]+\(%rip\)", "X(%rip)", ops)
        out.append("%s %s" % (mnemonic, ops))
    return out


def same(path, f1, f2):
    import difflib
    a, b = normalized(path, f1), normalized(path, f2)
    for f in (f1, f2):
        main(path, f, quiet=True)
    diff = list(difflib.unified_diff(a, b, f1, f2, lineterm="", n=1))
    if diff:
        print("\n".join(diff))
        print("%s and %s differ" % (f1, f2))
        return 1
    print("%s and %s: the same %d instructions" % (f1, f2, len(a)))
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--same":
        sys.exit(same(sys.argv[2], sys.argv[3], sys.argv[4]))
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    main(sys.argv[1], sys.argv[2])
