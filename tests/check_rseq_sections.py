#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Checks every rseq critical section compiled into ELF files, as the kernel
will see it (an ELF file of any port of include/pcpu/arch/, told apart by
its header).

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
  5. the four bytes before abort_ip are the target's signature (its arch
     header's PCPU__RSEQ_SIG: glibc's RSEQ_SIG);
  6. __rseq_cs_ptr_array points at every descriptor, and every jump from
     inside a range to outside it (other than to abort_ip) is listed in
     __rseq_exit_point_array (librseq's layout, which debuggers read);
  7. a commit that may fail without writing (a store-exclusive: ARMv7's
     carry sections commit with `strexd`; the port's optional
     PCPU__ARCH_INSN_STORE_EXCLUSIVE) has its status register tested by
     the instructions right after the range -- `cbnz`, or a compare of it
     followed by a conditional branch -- so that a failed store is
     reported as an abort, never as a commit. Those instructions lie past
     the post-commit label: the kernel no longer restarts the thread
     there, and need not.

Usage: check_rseq_sections.py [--expect-broken] MIN_SECTIONS ELF [MIN_SECTIONS ELF ...]
Each ELF must hold at least MIN_SECTIONS descriptors (so a parser that finds
none fails). With --expect-broken, the ELF files were built with
PCPU_TEST_BROKEN_SECTION, and the check passes only if it finds every
section's commit outside its range (the test of this test).

Every target is a port of include/pcpu/arch/, and what this script needs to
know of it -- its ELF machine, signature, relocation, binutils, and which
instructions store, call and branch -- it reads from the port's header
(tests/arch_headers.py): a new port needs no change here. Uses binutils'
readelf and objdump for the target (<triplet>-readelf where installed, else
the host's; the environment variables READELF and OBJDUMP override both).
Exit 0 if all hold, 1 with each fault listed otherwise.
"""
import os
import re
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import arch_headers  # noqa: E402

DESC = 32


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
TARGET = re.compile(r"(?:^|[ ,])([0-9a-f]+)\s*(?:<[^>]*>)?$")


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
        ops = t.operands(parts[1]) if len(parts) > 1 else ""
        out.append((int(m.group(1), 16), nbytes, parts[0] if parts else "", ops))
    return out


def branch_target(t, mnemonic, ops):
    """The address a direct branch goes to, or None."""
    if not t.is_branch(mnemonic, ops):
        return None
    m = TARGET.search(ops)
    return int(m.group(1), 16) if m else None


def status_untested(t, path, end, commit_ops):
    """None if the instructions at `end` (just past a store-exclusive
    commit) test its status register (the commit's first operand) and
    branch on it: `cbnz status`, or a compare or test of it and then a
    conditional branch. Else what is wrong."""
    status = commit_ops.split(",")[0].strip()
    after = disassemble(t, path, end, end + 16)
    if not after or after[0][0] != end:
        return "nothing follows its range"
    _, _, m0, o0 = after[0]
    first = o0.split(",")[0].strip()
    if re.match(r"cbnz", m0) and first == status:
        return None
    if re.match(r"(cmp|cmn|tst|teq)", m0) and first == status and len(after) > 1:
        _, _, m1, o1 = after[1]
        if t.is_branch(m1, o1) and not t.is_jump(m1, o1):
            return None
    return ("`%s %s` after its range does not test its status register %s and branch "
            "(a failed store would pass for a commit)" % (m0, o0, status))


def check(path, minimum, commit_outside):
    """(sections found, faults); adds the start of each section whose commit
    lies outside its range to commit_outside."""
    t = arch_headers.by_elf(path)
    if t is None:
        return 0, ["%s: not an ELF file of a port of include/pcpu/arch/ (%s)"
                   % (path, ", ".join(arch_headers.ports()))]
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
        if not t.writes_memory(mnemonic, ops):
            faults.append("%s: last instruction `%s %s` at %#x writes no memory: the commit "
                          "is not the section's last instruction" % (where, mnemonic, ops, a))
            commit_outside.add(start)
        for a, _, mnemonic, ops in insns:
            if t.is_call(mnemonic, ops):
                faults.append("%s: `%s %s` at %#x inside the section" % (where, mnemonic, ops, a))
            dest = branch_target(t, mnemonic, ops)
            if dest is not None and not (start <= dest < end) and dest != abort and \
                    (start, dest) not in exit_points:
                faults.append("%s: `%s %s` at %#x leaves the section but is not in "
                              "__rseq_exit_point_array" % (where, mnemonic, ops, a))
        if t.is_store_exclusive(mnemonic, ops):
            fault = status_untested(t, path, end, ops)
            if fault:
                faults.append("%s: the commit `%s %s` at %#x may fail, but %s" % (where, mnemonic, ops, a, fault))
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
