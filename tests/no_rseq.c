/*
 * no_rseq PROGRAM [ARGS...]: runs PROGRAM with the rseq system call refused
 * by a seccomp filter (EPERM, as container runtimes' default profiles do),
 * so glibc cannot register rseq at start-up and neither can pcpu: the
 * program runs on pcpu's fallback path. Used by the test suite.
 *
 * Built a second time as no_membarrier (DENY_MEMBARRIER): membarrier refused
 * with ENOSYS, as on a kernel without it, while rseq still works; pcpu_ref
 * and pcpu_rwlock must then be atomic from the start (pcpu/ref.h).
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <pcpu/arch.h>

/* The arch header's (pcpu/arch/<arch>.h) audit architecture. */
#ifdef PCPU__ARCH_AUDIT
#define ARCH_NR PCPU__ARCH_AUDIT
#else
#error "this target's arch header (pcpu/arch/<arch>.h) has no PCPU__ARCH_AUDIT"
#endif

#ifdef DENY_MEMBARRIER
#define DENIED_NR __NR_membarrier
#define DENIED_ERRNO ENOSYS
#define TOOL "no_membarrier"
#else
#define DENIED_NR __NR_rseq
#define DENIED_ERRNO EPERM
#define TOOL "no_rseq"
#endif

int main(int argc, char **argv)
{
	struct sock_filter filter[] = {
		/* Other architectures' system call numbers mean other calls. */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH_NR, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, DENIED_NR, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | DENIED_ERRNO),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = {sizeof(filter) / sizeof(filter[0]), filter};

	if (argc < 2) {
		fprintf(stderr, "usage: %s PROGRAM [ARGS...]\n", argv[0]);
		return 2;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
		perror(TOOL ": seccomp");
		return 2;
	}
	execvp(argv[1], argv + 1);
	perror(TOOL ": exec");
	return 2;
}
