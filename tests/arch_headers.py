#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""What each port says about itself, read from its header: the constants of
include/pcpu/arch/<arch>.h that the tests need to read its machine code and
to build and boot it (tests/check_rseq_sections.py, bench/loop_insns.py,
scripts/vm/run.sh), so that a port is its header and no test carries a
table of architectures.

A port's header is a file of include/pcpu/arch/ that defines PCPU_ARCH_NAME.
Its constants are its `#define NAME VALUE` lines whose VALUE is a string
literal without backslashes or a number (decimal or 0x hexadecimal):
PCPU_ARCH_NAME, PCPU__RSEQ_SIG and the PCPU__ARCH_* test constants
(pcpu/arch/x86_64.h says what each means; PCPU__ARCH_INSN_STORE_EXCLUSIVE,
optional, pcpu/arch/arm.h).

Usage as a program (for shell scripts):
  arch_headers.py NAME KEY     prints port NAME's constant KEY
  arch_headers.py --list       prints each port's name
Exit 1 (and a message) for an unknown port or constant.
"""
import glob
import os
import re
import shutil
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFINE = re.compile(r'^#define\s+(PCPU_ARCH_NAME|PCPU__RSEQ_SIG|PCPU__ARCH_[A-Z0-9_]+)\s+'
                    r'("[^"\\]*"|0x[0-9a-fA-F]+|[0-9]+)\s*$')
NEEDED = ("PCPU_ARCH_NAME", "PCPU__RSEQ_SIG", "PCPU__ARCH_ELF_MACHINE", "PCPU__ARCH_ELF_CLASS",
          "PCPU__ARCH_CROSS", "PCPU__ARCH_RELATIVE_RELOC", "PCPU__ARCH_ASM_COMMENT",
          "PCPU__ARCH_INSN_STORE", "PCPU__ARCH_INSN_LOAD", "PCPU__ARCH_INSN_CALL",
          "PCPU__ARCH_INSN_BRANCH", "PCPU__ARCH_INSN_JUMP")


class Port:
    """One port's constants, and what the tests do with them."""

    def __init__(self, path, consts):
        missing = [k for k in NEEDED if k not in consts]
        if missing:
            raise ValueError("%s: no %s" % (path, ", ".join(missing)))
        self.path = path
        self.consts = consts
        self.name = consts["PCPU_ARCH_NAME"]
        self.signature = consts["PCPU__RSEQ_SIG"]
        self.machine = consts["PCPU__ARCH_ELF_MACHINE"]
        self.elf_class = consts["PCPU__ARCH_ELF_CLASS"]
        self.cross = consts["PCPU__ARCH_CROSS"]
        self.reloc = consts["PCPU__ARCH_RELATIVE_RELOC"]
        self.comment = consts["PCPU__ARCH_ASM_COMMENT"]
        self.store = re.compile(consts["PCPU__ARCH_INSN_STORE"])
        self.load = re.compile(consts["PCPU__ARCH_INSN_LOAD"])
        self.call = re.compile(consts["PCPU__ARCH_INSN_CALL"])
        self.branch = re.compile(consts["PCPU__ARCH_INSN_BRANCH"])
        self.jump = re.compile(consts["PCPU__ARCH_INSN_JUMP"])
        # optional: a store that may fail, its status in its first operand
        excl = consts.get("PCPU__ARCH_INSN_STORE_EXCLUSIVE")
        self.store_exclusive = re.compile(excl) if excl else None

    def tool(self, name):
        """The binutils program `name` for this target: $NAME (upper case)
        if set, else the cross one (<triplet>-name) if installed, else the
        host's."""
        env = os.environ.get(name.upper())
        if env:
            return env
        if shutil.which(self.cross + "-" + name):
            return self.cross + "-" + name
        return name

    def operands(self, text):
        """objdump's operand text without its trailing comment."""
        return text.split(self.comment)[0].split(";")[0].strip()

    @staticmethod
    def _line(mnemonic, ops):
        return mnemonic + " " + ops if ops else mnemonic

    def writes_memory(self, mnemonic, ops):
        return bool(self.store.search(self._line(mnemonic, ops)))

    def reads_memory(self, mnemonic, ops):
        return bool(self.load.search(self._line(mnemonic, ops)))

    def is_call(self, mnemonic, ops=""):
        return bool(self.call.search(self._line(mnemonic, ops)))

    def is_branch(self, mnemonic, ops=""):
        return bool(self.branch.search(self._line(mnemonic, ops)))

    def is_jump(self, mnemonic, ops=""):
        return bool(self.jump.search(self._line(mnemonic, ops)))

    def is_store_exclusive(self, mnemonic, ops=""):
        return bool(self.store_exclusive and self.store_exclusive.search(self._line(mnemonic, ops)))


def _value(text):
    if text.startswith('"'):
        return text[1:-1]
    return int(text, 0)


def ports(root=ROOT):
    """Every port of include/pcpu/arch/, by name."""
    out = {}
    for path in sorted(glob.glob(os.path.join(root, "include", "pcpu", "arch", "*.h"))):
        consts = {}
        with open(path) as fh:
            for line in fh:
                m = DEFINE.match(line)
                if m:
                    consts.setdefault(m.group(1), _value(m.group(2)))
        if "PCPU_ARCH_NAME" in consts:
            port = Port(path, consts)
            out[port.name] = port
    return out


def by_elf(path, root=ROOT):
    """The port whose code an ELF file holds (little-endian, of the port's
    class and e_machine), or None."""
    with open(path, "rb") as fh:
        head = fh.read(20)
    if len(head) < 20 or head[:4] != b"\x7fELF" or head[5] != 1:
        return None
    machine = int.from_bytes(head[18:20], "little")
    elf_class = {1: 32, 2: 64}.get(head[4])
    for port in ports(root).values():
        if port.machine == machine and port.elf_class == elf_class:
            return port
    return None


def main(argv):
    all_ports = ports()
    if len(argv) == 2 and argv[1] == "--list":
        print("\n".join(all_ports))
        return 0
    if len(argv) != 3:
        print(__doc__.split("Usage as a program (for shell scripts):\n")[1].split("\n\n")[0],
              file=sys.stderr)
        return 2
    port = all_ports.get(argv[1])
    if port is None:
        print("arch_headers.py: no port %s (ports: %s)" % (argv[1], " ".join(all_ports)),
              file=sys.stderr)
        return 1
    if argv[2] not in port.consts:
        print("arch_headers.py: %s defines no %s" % (port.path, argv[2]), file=sys.stderr)
        return 1
    print(port.consts[argv[2]])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
