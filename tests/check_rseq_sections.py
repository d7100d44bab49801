#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks every rseq critical section compiled into ELF files, as the kernel
will see it (x86-64).

The kernel reads a section only through its 32-byte descriptor in __rseq_cs:
start_ip, post_commit_offset, abort_ip. It aborts a thread preempted,
migrated or signalled while its instruction pointer lies in [start_ip,
start_ip + post_commit_offset), and checks the four bytes before abort_ip
against the signature. Nothing at run time can tell that a section's range
misses its commit: a store just past the range runs unprotected, and only a
preemption landing between the range's end and that store, once in a long
while, loses or doubles an update. So this test reads the compiled code:

  1. every descriptor has version 0, flags 0, and its range inside .text;
  2. the range starts and ends on instruction boundaries (the disassembly
     of [start, end) ends exactly at end);
  3. the range's last instruction writes memory: the commit, the one store
     that makes the section's work visible (a compare, a jump or a register
     move there means the commit lies outside the range);
  4. no call or system call inside the range (the callee's instructions
     would lie outside it, unprotected);
  5. the four bytes before abort_ip are the signature 0x53053053.

Usage: check_rseq_sections.py MIN_SECTIONS ELF [MIN_SECTIONS ELF ...]
Each ELF must hold at least MIN_SECTIONS descriptors (so a parser that finds
none fails). Uses binutils' readelf and objdump. Exit 0 if all hold, 1 with
each fault listed otherwise.
"""
import re
import struct
import subprocess
import sys

SIGNATURE = 0x53053053
DESC = 32


def run(*argv):
    return subprocess.run(argv, check=True, capture_output=True, text=True).stdout


def sections(path):
    """name -> (address, file offset, size) of each ELF section."""
    out = {}
    for line in run("readelf", "-SW", path).splitlines():
        m = re.match(r"\s*\[\s*\d+\]\s+(\S+)\s+\S+\s+([0-9a-f]+)\s+([0-9a-f]+)\s+([0-9a-f]+)", line)
        if m:
            out[m.group(1)] = (int(m.group(2), 16), int(m.group(3), 16), int(m.group(4), 16))
    return out


def relative_relocs(path):
    """address -> value of each R_X86_64_RELATIVE relocation (PIE, .so): the
    descriptor's code addresses are filled in by ld.so, not in the file."""
    out = {}
    for line in run("readelf", "-rW", path).splitlines():
        f = line.split()
        if len(f) >= 4 and f[2] == "R_X86_64_RELATIVE":
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


INSN = re.compile(r"^\s*([0-9a-f]+):\t([0-9a-f ]+)\t(.*)$")
READ_ONLY = {"cmp", "test", "bt", "nop", "ud1", "ud2", "prefetcht0", "prefetchnta"}


def disassemble(path, start, end):
    """(address, length, mnemonic, operands) of each instruction in [start, end)."""
    out = []
    text = run("objdump", "-d", "--insn-width=16", "--start-address=%#x" % start,
               "--stop-address=%#x" % end, path)
    for line in text.splitlines():
        m = INSN.match(line)
        if not m:
            continue
        nbytes = len(m.group(2).split())
        parts = m.group(3).split(None, 1)
        out.append((int(m.group(1), 16), nbytes, parts[0] if parts else "",
                    parts[1].split("#")[0].strip() if len(parts) > 1 else ""))
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


def writes_memory(mnemonic, ops):
    base = re.sub(r"[bwlq]$", "", mnemonic) if mnemonic not in ("movdqa", "movdqu") else mnemonic
    if mnemonic.startswith("j") or mnemonic.startswith("set") or base in READ_ONLY:
        return False
    dst = last_operand(ops)
    return "(" in dst or dst.startswith("%fs:") or dst.startswith("%gs:")


def check(path, minimum):
    secs = sections(path)
    faults = []
    if "__rseq_cs" not in secs:
        return 0, ["%s: no __rseq_cs section" % path]
    text = secs.get(".text")
    relocs = relative_relocs(path)
    addr, off, size = secs["__rseq_cs"]
    with open(path, "rb") as fh:
        fh.seek(off)
        raw = fh.read(size)
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
        if version != 0 or flags != 0:
            faults.append("%s: version %d flags %d, not 0 0" % (where, version, flags))
        if pco == 0 or not text or not (text[0] <= start and end <= text[0] + text[2]):
            faults.append("%s: range empty or outside .text" % where)
            continue
        insns = disassemble(path, start, end)
        if not insns or insns[0][0] != start or insns[-1][0] + insns[-1][1] != end:
            faults.append("%s: range not on instruction boundaries" % where)
            continue
        a, _, mnemonic, ops = insns[-1]
        if not writes_memory(mnemonic, ops):
            faults.append("%s: last instruction `%s %s` at %#x writes no memory: the commit "
                          "is not the section's last instruction" % (where, mnemonic, ops, a))
        for a, _, mnemonic, ops in insns:
            if mnemonic.startswith("call") or mnemonic in ("syscall", "int", "sysenter"):
                faults.append("%s: `%s %s` at %#x inside the section" % (where, mnemonic, ops, a))
        sig = read_at(path, secs, abort - 4, 4)
        if sig is None or struct.unpack("<I", sig)[0] != SIGNATURE:
            faults.append("%s: the 4 bytes before abort_ip %#x are not the signature" % (where, abort))
    if n < minimum:
        faults.append("%s: %d sections found, expected at least %d" % (path, n, minimum))
    return n, faults


def main(argv):
    if len(argv) < 3 or len(argv) % 2 == 0:
        print(next(l for l in __doc__.splitlines() if l.startswith("Usage:")), file=sys.stderr)
        return 2
    all_faults = []
    for i in range(1, len(argv), 2):
        n, faults = check(argv[i + 1], int(argv[i]))
        print("%s: %d sections checked, %d faults" % (argv[i + 1], n, len(faults)))
        all_faults += faults
    for f in all_faults:
        print("FAULT " + f)
    return 1 if all_faults else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
