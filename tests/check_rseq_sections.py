#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks every rseq critical section compiled into ELF files, as the kernel
will see it (x86-64, aarch64, 32-bit Arm and riscv64 ELF files, told apart
by their header).

The kernel reads a section only through its 32-byte descriptor in __rseq_cs:
start_ip, post_commit_offset, abort_ip. It aborts a thread preempted,
migrated or signalled while its instruction pointer lies in [start_ip,
start_ip + post_commit_offset), and checks the four bytes before abort_ip
against the signature. Nothing at run time can tell that a section's range
misses its commit: a store just past the range runs unprotected, and only a
preemption landing between the range's end and that store, once in a long
while, loses or doubles an update. So this test reads the compiled code:

  1. every descriptor has version 0, flags 0, its range inside .text and
     abort_ip outside the range;
  2. the range starts and ends on instruction boundaries (the disassembly
     of [start, end) ends exactly at end);
  3. the range's last instruction writes memory: the commit, the one store
     that makes the section's work visible (a compare, a jump or a register
     move there means the commit lies outside the range);
  4. no call or system call inside the range (the callee's instructions
     would lie outside it, unprotected);
  5. the four bytes before abort_ip are the target's signature (x86-64
     0x53053053, aarch64 0xd428bc00, arm 0xe7f5def3, riscv64 0xf1401073:
     glibc's RSEQ_SIG);
  6. __rseq_cs_ptr_array points at every descriptor, and every jump from
     inside a range to outside it (other than to abort_ip) is listed in
     __rseq_exit_point_array (librseq's layout, which debuggers read).

Usage: check_rseq_sections.py [--expect-broken] MIN_SECTIONS ELF [MIN_SECTIONS ELF ...]
Each ELF must hold at least MIN_SECTIONS descriptors (so a parser that finds
none fails). With --expect-broken, the ELF files were built with
PCPU_TEST_BROKEN_SECTION, and the check passes only if it finds every
section's commit outside its range (the test of this test). Uses binutils' readelf and objdump: the host's for x86-64,
aarch64-linux-gnu-, arm-linux-gnueabihf- and riscv64-linux-gnu-readelf and
-objdump for the others (the environment
variables READELF and OBJDUMP override both). Exit 0 if all hold, 1 with
each fault listed otherwise.
"""
import os
import re
import shutil
import struct
import subprocess
import sys

DESC = 32


class Target:
    """What differs between the architectures this script reads."""

    def __init__(self, name, signature, reloc, prefix):
        self.name = name
        self.signature = signature
        self.reloc = reloc  # the relative relocation's type name
        self.prefix = prefix  # of the cross binutils

    def tool(self, name):
        env = os.environ.get(name.upper())
        if env:
            return env
        if self.prefix and shutil.which(self.prefix + name):
            return self.prefix + name
        return name


X86_64 = Target("x86-64", 0x53053053, "R_X86_64_RELATIVE", "")
AARCH64 = Target("aarch64", 0xd428bc00, "R_AARCH64_RELATIVE", "aarch64-linux-gnu-")
# 32-bit Arm: REL relocations, the value in place (what the file holds).
ARM = Target("arm", 0xe7f5def3, "R_ARM_RELATIVE", "arm-linux-gnueabihf-")
RISCV64 = Target("riscv64", 0xf1401073, "R_RISCV_RELATIVE", "riscv64-linux-gnu-")
MACHINES = {62: X86_64, 183: AARCH64, 40: ARM, 243: RISCV64}  # ELF e_machine
ARM_BRANCH = re.compile(r"^(b(eq|ne|cs|hs|cc|lo|mi|pl|vs|vc|hi|ls|ge|lt|gt|le)?(\.[nw])?|cbn?z)$")
RV_BRANCH = re.compile(r"^(j|beqz?|bnez?|bltu?|bgeu?|bgtu?|bleu?|bltz|bgez|blez|bgtz)$")


def elf_target(path):
    with open(path, "rb") as fh:
        head = fh.read(20)
    if head[:4] != b"\x7fELF" or head[5] != 1:
        return None  # not a little-endian ELF file
    t = MACHINES.get(struct.unpack_from("<H", head, 18)[0])
    # 64-bit files, but for 32-bit Arm (whose rseq tables keep the ABI's
    # 64-bit fields: the words read below are the same).
    return t if head[4] == (1 if t is ARM else 2) else None


def run(*argv):
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def sections(t, path):
    """name -> (address, file offset, size) of each ELF section."""
    out = {}
    for line in run(t.tool("readelf"), "-SW", path).splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)", line)
        if m:
            out[m.group(1)] = (int(m.group(2), 16), int(m.group(3), 16), int(m.group(4), 16))
    return out


def relative_relocs(t, path):
    """address -> value of each relative relocation (PIE, .so): the
    descriptors' code addresses are filled in by ld.so, not in the file."""
    out = {}
    for line in run(t.tool("readelf"), "-rW", path).splitlines():
        f = line.split()
        if len(f) >= 4 and f[2] == t.reloc:
            out[int(f[0], 16)] = int(f[3], 16)
    return out


def read_at(path, secs, addr, size):
    """Bytes at a virtual address, from the section that holds it."""
    for name, (a, off, sz) in secs.items():
        if a and a <= addr and addr + size <= a + sz:
            with open(path, "rb") as fh:
                fh.seek(off + addr - a)
                return fh.read(size)
    return None


def read_words(path, secs, name, relocs):
    """The 64-bit words of section `name`, relocated."""
    if name not in secs:
        return []
    addr, off, size = secs[name]
    with open(path, "rb") as fh:
        fh.seek(off)
        raw = fh.read(size)
    return [relocs.get(addr + i, struct.unpack_from("<Q", raw, i)[0]) for i in range(0, size - 7, 8)]


INSN = re.compile(r"^\s*([0-9a-f]+):\t([0-9a-f ]+)\t(.*)$")
X86_READ_ONLY = {"cmp", "test", "bt", "nop", "ud1", "ud2", "prefetcht0", "prefetchnta"}
A64_RMW = re.compile(r"^(ld(add|clr|eor|set|smax|smin|umax|umin)|swp|cas)")


def disassemble(t, path, start, end):
    """(address, length, mnemonic, operands) of each instruction in [start, end)."""
    out = []
    text = run(t.tool("objdump"), "-d", "--insn-width=16", "--start-address=%#x" % start,
               "--stop-address=%#x" % end, path)
    for line in text.splitlines():
        m = INSN.match(line)
        if not m:
            continue
        nbytes = sum(len(tok) // 2 for tok in m.group(2).split())  # bytes, or aarch64's words
        parts = m.group(3).split(None, 1)
        ops = parts[1] if len(parts) > 1 else ""
        ops = ops.split("//")[0] if t is AARCH64 else \
            ops.split("@")[0].split(";")[0] if t is ARM else ops.split("#")[0]
        out.append((int(m.group(1), 16), nbytes, parts[0] if parts else "", ops.strip()))
    return out


def last_operand(ops):
    """The last (AT&T: destination) operand, commas inside parentheses kept."""
    depth, cut = 0, 0
    for i, ch in enumerate(ops):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            cut = i + 1
    return ops[cut:].strip()


def writes_memory(t, mnemonic, ops):
    if t is AARCH64:
        return mnemonic.startswith("st") or bool(A64_RMW.match(mnemonic))
    if t is ARM:
        return mnemonic.startswith("st") or mnemonic.startswith("push")
    if t is RISCV64:
        return bool(re.match(r"^(s[bhwd]|sc\.|amo)", mnemonic))
    base = re.sub(r"[bwlq]$", "", mnemonic) if mnemonic not in ("movdqa", "movdqu") else mnemonic
    if mnemonic.startswith("j") or mnemonic.startswith("set") or base in X86_READ_ONLY:
        return False
    dst = last_operand(ops)
    return "(" in dst or dst.startswith("%fs:") or dst.startswith("%gs:")


def is_call(t, mnemonic):
    if t is AARCH64:
        return mnemonic in ("bl", "blr", "blraa", "blrab", "svc", "hvc", "smc")
    if t is ARM:
        return mnemonic in ("bl", "blx", "svc")
    if t is RISCV64:
        return mnemonic in ("jal", "jalr", "call", "ecall")
    return mnemonic.startswith("call") or mnemonic in ("syscall", "int", "sysenter")


def branch_target(t, mnemonic, ops):
    """The address a direct branch goes to, or None."""
    if t is AARCH64:
        if not (mnemonic in ("b", "cbz", "cbnz", "tbz", "tbnz") or mnemonic.startswith("b.")):
            return None
    elif t is ARM:
        if not ARM_BRANCH.match(mnemonic):
            return None
    elif t is RISCV64:
        if not RV_BRANCH.match(mnemonic):
            return None
    elif not mnemonic.startswith("j"):
        return None
    m = re.search(r"(?:^|[ ,])([0-9a-f]+)\s*(?:<[^>]*>)?$", ops)
    return int(m.group(1), 16) if m else None


def check(path, minimum, commit_outside):
    """(sections found, faults); adds the start of each section whose commit
    lies outside its range to commit_outside."""
    t = elf_target(path)
    if t is None:
        return 0, ["%s: not an x86-64, aarch64, arm or riscv64 ELF file" % path]
    secs = sections(t, path)
    faults = []
    if "__rseq_cs" not in secs:
        return 0, ["%s: no __rseq_cs section" % path]
    text = secs.get(".text")
    relocs = relative_relocs(t, path)
    addr, off, size = secs["__rseq_cs"]
    with open(path, "rb") as fh:
        fh.seek(off)
        raw = fh.read(size)
    pointed = set(read_words(path, secs, "__rseq_cs_ptr_array", relocs))
    exits = read_words(path, secs, "__rseq_exit_point_array", relocs)
    exit_points = set(zip(exits[0::2], exits[1::2]))
    n = 0
    for i in range(0, size - DESC + 1, DESC):
        version, flags, start, pco, abort = struct.unpack_from("<IIQQQ", raw, i)
        if version == 0 and flags == 0 and start == 0 and pco == 0 and abort == 0 and \
                addr + i + 8 not in relocs:
            continue  # alignment padding between descriptors
        start = relocs.get(addr + i + 8, start)
        abort = relocs.get(addr + i + 24, abort)
        end = start + pco
        n += 1
        where = "%s: section %#x-%#x (descriptor %#x)" % (path, start, end, addr + i)
        if addr + i not in pointed:
            faults.append("%s: not in __rseq_cs_ptr_array" % where)
        if version != 0 or flags != 0:
            faults.append("%s: version %d flags %d, not 0 0" % (where, version, flags))
        if pco == 0 or not text or not (text[0] <= start and end <= text[0] + text[2]):
            faults.append("%s: range empty or outside .text" % where)
            continue
        if start <= abort < end:
            faults.append("%s: abort_ip %#x inside the range" % (where, abort))
        insns = disassemble(t, path, start, end)
        if not insns or insns[0][0] != start or insns[-1][0] + insns[-1][1] != end:
            faults.append("%s: range not on instruction boundaries" % where)
            continue
        a, _, mnemonic, ops = insns[-1]
        if not writes_memory(t, mnemonic, ops):
            faults.append("%s: last instruction `%s %s` at %#x writes no memory: the commit "
                          "is not the section's last instruction" % (where, mnemonic, ops, a))
            commit_outside.add(start)
        for a, _, mnemonic, ops in insns:
            if is_call(t, mnemonic):
                faults.append("%s: `%s %s` at %#x inside the section" % (where, mnemonic, ops, a))
            dest = branch_target(t, mnemonic, ops)
            if dest is not None and not (start <= dest < end) and dest != abort and \
                    (start, dest) not in exit_points:
                faults.append("%s: `%s %s` at %#x leaves the section but is not in "
                              "__rseq_exit_point_array" % (where, mnemonic, ops, a))
        sig = read_at(path, secs, abort - 4, 4)
        if sig is None or struct.unpack("<I", sig)[0] != t.signature:
            faults.append("%s: the 4 bytes before abort_ip %#x are not the %s signature %#x"
                          % (where, abort, t.name, t.signature))
    if n < minimum:
        faults.append("%s: %d sections found, expected at least %d" % (path, n, minimum))
    return n, faults


def check_broken(path, minimum):
    """Faults of a PCPU_TEST_BROKEN_SECTION build: none if every section's
    commit was found outside its range."""
    outside = set()
    n, faults = check(path, minimum, outside)
    if n < minimum:
        return n, faults
    if len(outside) != n:
        return n, ["%s: built with broken sections, but only %d of %d found broken"
                   % (path, len(outside), n)]
    return n, []


def main(argv):
    broken = len(argv) > 1 and argv[1] == "--expect-broken"
    args = argv[2:] if broken else argv[1:]
    if len(args) < 2 or len(args) % 2:
        print(next(l for l in __doc__.splitlines() if l.startswith("Usage:")), file=sys.stderr)
        return 2
    all_faults = []
    for i in range(0, len(args), 2):
        if broken:
            n, faults = check_broken(args[i + 1], int(args[i]))
            print("%s: %d sections checked, all broken as built: %s"
                  % (args[i + 1], n, "no" if faults else "yes"))
        else:
            n, faults = check(args[i + 1], int(args[i]), set())
            print("%s: %d sections checked, %d faults" % (args[i + 1], n, len(faults)))
        all_faults += faults
    for f in all_faults:
        print("FAULT " + f)
    return 1 if all_faults else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
