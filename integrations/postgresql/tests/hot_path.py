#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""The counting path of pcpu_stat_statements.so takes no lock and does no
atomic read-modify-write, checked in its machine code (objdump -d):

  - the hooks a statement runs through -- ExecutorStart, ExecutorRun,
    ExecutorFinish, ExecutorEnd, ProcessUtility, the planner and parse
    analysis (pss_*) -- hold no lock-prefixed instruction, no xchg with
    memory (implicitly locked) and no fence;
  - nor does any function of the module a hook reaches (its calls,
    transitively: store(), extremes(), pss_entry_check(), the counting
    section's pss_slot_attach() and pss_section_purge()...), and none of
    them calls a lock of PostgreSQL's or of libc's (LWLockAcquire,
    SpinLockAcquire's s_lock, pthread_mutex_lock, LockAcquire...) -- short
    of pss_entry_get() and pss_entry_text(), which register a new entry or
    text in the tree under the directory's lock (the first time a backend
    meets a key: "finding a new entry may take a lock");
  - the only atomic read-modify-writes a hook reaches are in raise_max()
    and lower_min() (a new extreme, off the common path: a compare with the
    backend's own copies comes first), pss_entry_in() (an entry new, or
    evicted or reset since: brought into the table; off the common path, a
    load of the tree's resets word comes first) and the library's out-of-line slow
    paths (pcpu__counter_add_slow: a thread without rseq);
  - the execution times' histogram is recorded on the ExecutorEnd path:
    pcpu_histogram_record() inlined there (its bucket lookup and rseq
    section checked with the rest), found by the call to its out-of-line
    slow path, pcpu__histogram_add_pair_slow (which pss_ExecutorEnd must
    reach, and which itself only calls the library's counter slow path).

usage: hot_path.py MODULE.so
Exit 0 passed, 1 failed, 77 no objdump.
"""
import re
import shutil
import subprocess
import sys

HOOKS = ["pss_ExecutorStart", "pss_ExecutorRun", "pss_ExecutorFinish", "pss_ExecutorEnd",
         "pss_ProcessUtility", "pss_planner", "pss_post_parse_analyze"]
LOCKS = re.compile(r"<(LWLockAcquire|LWLockConditionalAcquire|s_lock|tas|LockAcquire|"
                   r"pthread_mutex_lock|pthread_rwlock_\w+|pthread_spin_lock|sem_wait|"
                   r"flock|fcntl)(@plt)?>")
ATOMIC = re.compile(r"^\s*[0-9a-f]+:\s+(lock\b|xchg\w*\s+\S+,\s*\(|xchg\w*\s+\(|mfence|"
                    r"sfence|lfence)")


def main():
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    if shutil.which("objdump") is None:
        print("SKIP: objdump (binutils) is not installed")
        return 77
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", sys.argv[1]],
                         capture_output=True, text=True, check=True).stdout
    funcs, name, reached = {}, None, {}
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ <([^>]+)>:$", line)
        if m:
            name = m.group(1)
            funcs[name] = []
        elif name:
            funcs[name].append(line)
    problems = []
    # What a hook reaches inside the module (its calls, transitively),
    # short of the functions allowed their lock or atomic: the new
    # extremes' CAS and a new entry's registration.
    allowed = {"raise_max", "lower_min", "pss_entry_get", "pss_entry_text", "pss_entry_in"}
    for hook in HOOKS:
        if hook not in funcs:
            problems.append("%s: not found in the module" % hook)
            continue
        seen, todo = set(), [hook]
        while todo:
            f = todo.pop()
            if f in seen or f in allowed or f not in funcs:
                continue
            seen.add(f)
            todo.extend(f2 + suffix for f2 in funcs for suffix in ("",)
                        if f2.startswith(f + ".") and f2 != f)
            for line in funcs[f]:
                m = re.search(r"\bcall\s+[0-9a-f]+ <([^>@+]+)(@plt)?>", line)
                if m:
                    todo.append(m.group(1))
                if ATOMIC.match(line):
                    problems.append("%s (from %s): an atomic instruction: %s"
                                    % (f, hook, line.strip()))
                if LOCKS.search(line):
                    problems.append("%s (from %s): calls a lock: %s" % (f, hook, line.strip()))
        reached[hook] = sorted(seen)
    # The histogram's record on the executor-end path (inlined: its slow
    # path's call is the trace it leaves).
    if not any(f.startswith("pcpu__histogram_add_pair_slow")
               for f in reached.get("pss_ExecutorEnd", [])):
        problems.append("pss_ExecutorEnd: no histogram record reached "
                        "(pcpu__histogram_add_pair_slow not called)")
    atomics = sorted({f for f, body in funcs.items() if any(ATOMIC.match(x) for x in body)})
    for f in ("raise_max", "lower_min"):
        if f not in atomics:
            problems.append("%s: no CAS found (inlined? then the check above saw it)" % f)
    if problems:
        print("FAIL:\n  " + "\n  ".join(problems))
        return 1
    print("without lock or atomic: the hooks and what they reach -- %s; atomics only in: %s"
          % (", ".join(sorted(set(sum(reached.values(), [])))), ", ".join(atomics)))
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
