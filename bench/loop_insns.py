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
other sections (an abort handler) show their real targets. Uses objdump for
x86-64 and the cross binutils' (aarch64-linux-gnu-, arm-linux-gnueabihf-,
riscv64-linux-gnu-objdump) for the others (environment OBJDUMP overrides). bench/README.md, "The counter add's instructions on x86-64 and
aarch64", has the commands.

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

# ELF e_machine -> (architecture, cross objdump prefix)
MACHINES = {62: ("x86_64", ""), 183: ("aarch64", "aarch64-linux-gnu-"),
            40: ("arm", "arm-linux-gnueabihf-"), 243: ("riscv64", "riscv64-linux-gnu-")}
ARM_BRANCH = re.compile(r"^(b(eq|ne|cs|hs|cc|lo|mi|pl|vs|vc|hi|ls|ge|lt|gt|le)?(\.[nw])?|cbn?z)$")
RV_BRANCH = re.compile(r"^(j|beqz?|bnez?|bltu?|bgeu?|bgtu?|bleu?|bltz|bgez|blez|bgtz)$")


def machine(path):
    with open(path, "rb") as fh:
        head = fh.read(20)
    return int.from_bytes(head[18:20], "little")


def disassemble(path, func):
    """(architecture, [(address, mnemonic, operands)]) of FUNCTION."""
    arch, prefix = MACHINES.get(machine(path), ("x86_64", ""))
    objdump = os.environ.get("OBJDUMP") or prefix + "objdump"
    out = subprocess.run([objdump, "-d", "--no-show-raw-insn", "--disassemble=" + func, path],
                         check=True, capture_output=True, text=True).stdout
    comment = {"aarch64": "//", "arm": "@"}.get(arch, "#")
    insns = []
    for line in out.splitlines():
        m = re.match(r"^\s*([0-9a-f]+):\s+(\S+)\s*(.*)$", line)
        if m:
            ops = m.group(3).split(comment)[0].split(";")[0].strip()
            insns.append((int(m.group(1), 16), m.group(2), ops))
    return arch, insns


def target(ops):
    """A direct branch's target address, or None."""
    m = re.search(r"(?:^|[ ,])([0-9a-f]+)\s*<[^>]*>$", ops)
    return int(m.group(1), 16) if m else None


def is_branch(arch, mnemonic):
    if arch == "aarch64":
        return mnemonic in ("b", "cbz", "cbnz", "tbz", "tbnz") or mnemonic.startswith("b.")
    if arch == "arm":
        return bool(ARM_BRANCH.match(mnemonic))
    if arch == "riscv64":
        return bool(RV_BRANCH.match(mnemonic))
    return mnemonic.startswith("j")


def is_unconditional(arch, mnemonic):
    if arch == "aarch64":
        return mnemonic == "b"
    if arch == "arm":
        return mnemonic in ("b", "b.n", "b.w")
    if arch == "riscv64":
        return mnemonic == "j"
    return mnemonic in ("jmp", "jmpq")


def loads(arch, mnemonic, ops):
    """1 if the instruction reads memory (x86-64: a memory operand that is
    not only a move's destination; aarch64, arm: ld*; riscv64: l[bhwd](u))."""
    if arch in ("aarch64", "arm"):
        return 1 if mnemonic.startswith("ld") else 0
    if arch == "riscv64":
        return 1 if re.match(r"^l[bhwd]u?$", mnemonic) else 0
    if "(" not in ops or mnemonic.startswith("lea") or mnemonic.startswith("nop"):
        return 0
    source = ops.split(",")[0]
    if mnemonic.startswith("mov") and "(" not in source and "%fs:" not in source:
        return 0  # a store
    return 1


def main(path, func, quiet=False):
    a64, insns = disassemble(path, func)  # the architecture's name
    index = {a: i for i, (a, _, _) in enumerate(insns)}
    back = [t for a, mn, ops in insns if is_branch(a64, mn)
            for t in [target(ops)] if t is not None and t < a and t in index]
    if not back:
        sys.exit("no loop in " + func)
    head = min(back)  # the outermost loop
    i, n, nloads = index[head], 0, 0
    while True:
        a, mnemonic, ops = insns[i]
        n += 1
        nloads += loads(a64, mnemonic, ops)
        if not quiet:
            print("  %x: %s %s" % (a, mnemonic, ops))
        t = target(ops)
        if is_branch(a64, mnemonic) and t == head:
            break
        i = index[t] if is_unconditional(a64, mnemonic) and t is not None else i + 1
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
