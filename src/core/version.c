/* SPDX-License-Identifier: MIT */
/*
 * version.c: the library's version at run time. It comes from the CMake
 * project version through the generated pcpu/version.h, the one source of
 * it; a program compares it with the PCPU_VERSION it was compiled with.
 */
#include <pcpu/runtime_version.h>
#include <pcpu/version.h> /* generated: PCPU_VERSION */

unsigned pcpu_version(void)
{
	return PCPU_VERSION;
}

unsigned pcpu_inline_layout(void)
{
	return PCPU__LAYOUT;
}

const char *pcpu_version_string(void)
{
	return PCPU_VERSION_STRING;
}
