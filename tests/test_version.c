/*
 * Versions: the library's run-time version is the headers' (one source:
 * the CMake project version), and a program built with the inline hot path
 * needs the version node of that layout. Run against a library of another
 * layout (tests/layout/stub.c) the same program must not start; the test
 * for that is in tests/CMakeLists.txt (layout_mismatch_refused).
 */
#include "check.h"
#include <pcpu/pcpu.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
	pcpu_counter_t c = pcpu_counter_alloc();
	char v[32];

	CHECK(c != NULL);
	pcpu_counter_add(c, 5); /* references pcpu__g@PCPU_LAYOUT_4 */
	CHECK_EQ_U64(pcpu_counter_fetch(c), 5);
	CHECK(pcpu_version() == PCPU_VERSION);
	snprintf(v, sizeof v, "%d.%d.%d", PCPU_VERSION_MAJOR, PCPU_VERSION_MINOR, PCPU_VERSION_PATCH);
	CHECK(strcmp(pcpu_version_string(), v) == 0 && strcmp(v, PCPU_VERSION_STRING) == 0);
	/* The layout a binding's own inline updates check (pcpu/runtime_version.h). */
	CHECK(pcpu_inline_layout() == PCPU__LAYOUT);
	printf("pcpu %s (layout %d)\n", pcpu_version_string(), PCPU__LAYOUT);
	return 0;
}
