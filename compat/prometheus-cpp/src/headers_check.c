/* SPDX-License-Identifier: MIT */
/*
 * libpcpu-prometheus-headers.o: the object the link name -lpcpu-prometheus
 * (a linker script that compat/prometheus-cpp/CMakeLists.txt writes) links into every
 * program and library beside libpcpu-prometheus.so.N. It refers to the
 * mark that each unit including the layer's headers defines
 * (prometheus/detail/core_export.h), so that a program compiled with
 * prometheus-cpp's own headers -- the same class names, other layouts --
 * and linked with the layer fails to link, with the fix in the symbol's
 * name, instead of running on the wrong objects:
 *
 *   undefined reference to
 *   `pcpu_prometheus_library_needs_its_headers_pkg_config_cflags_pcpu_prometheus'
 *
 * The reference is the one word of an ELF note (an allocated note, which
 * --gc-sections keeps where it drops unreferenced data), relative to its
 * own place: resolved when linking (the mark is hidden, so always in the
 * same program or library), no relocation left for run time, no code,
 * nothing loaded but the note's 16 bytes.
 */
__asm__(".pushsection .note.pcpu-prometheus, \"a\", %note\n"
	".balign 4\n"
	".long 5\n"    /* name size: "pcpu" and its NUL */
	".long 4\n"    /* description size: the word below */
	".long 0x50435055\n" /* type: "PCPU", a type of its own */
	".asciz \"pcpu\"\n"
	".balign 4\n"
	".long pcpu_prometheus_library_needs_its_headers_pkg_config_cflags_pcpu_prometheus - .\n"
	".popsection\n");
