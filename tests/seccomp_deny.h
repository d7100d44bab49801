/* Seccomp filters for pcpu's tests: system calls refused from now on, in
 * the calling thread and the threads it creates afterwards (threads that
 * exist already keep them), as a container's profile or a sandbox
 * installed after start-up would refuse them. */
#ifndef PCPU_TEST_SECCOMP_DENY_H
#define PCPU_TEST_SECCOMP_DENY_H

#include "check.h"
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include <pcpu/arch.h>

/* The arch header's (pcpu/arch/<arch>.h) audit architecture. */
#ifdef PCPU__ARCH_AUDIT
#define SECCOMP_DENY_ARCH PCPU__ARCH_AUDIT
#else
#error "this target's arch header (pcpu/arch/<arch>.h) has no PCPU__ARCH_AUDIT"
#endif

/* System calls nr1 and nr2 (-1: none) fail with `err` from now on. */
static inline void seccomp_deny(int nr1, int nr2, int err)
{
	struct sock_filter filter[] = {
		/* Other architectures' system call numbers mean other calls. */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SECCOMP_DENY_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr1, 1, 0),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (unsigned)nr2, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof(filter) / sizeof(filter[0]), filter};

	CHECK(prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0);
	CHECK(prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0);
}

/* membarrier(2) refused with `err` (EPERM: a seccomp profile; ENOSYS: as
 * if the kernel had none). */
static inline void seccomp_deny_membarrier(int err)
{
	seccomp_deny(__NR_membarrier, -1, err);
}

/* membarrier(2) and sched_setaffinity(2) both refused with EPERM: pcpu
 * can neither interrupt the other CPUs nor run on them. */
static inline void seccomp_deny_membarrier_and_affinity(void)
{
	seccomp_deny(__NR_membarrier, __NR_sched_setaffinity, EPERM);
}

#endif
