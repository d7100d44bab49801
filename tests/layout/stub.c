/* A stand-in for a libpcpu.so.0 of another hot-path layout: same soname,
 * the inline path's symbols under PCPU_LAYOUT_1 (stub.map). Never runs:
 * the dynamic linker must refuse a program built for PCPU_LAYOUT_4 first. */
#include <stdint.h>

__attribute__((visibility("default"))) struct { int32_t a, b; uint32_t r[2]; } pcpu__g;
__attribute__((visibility("default"))) void pcpu__counter_add_slow(void *c, int64_t v) { (void)c; (void)v; }
__attribute__((visibility("default"))) int pcpu__thread_prepare(void) { return -1; }
__attribute__((visibility("default"))) void *pcpu_counter_alloc(void) { return 0; }
__attribute__((visibility("default"))) uint64_t pcpu_counter_fetch(void *c) { (void)c; return 0; }
__attribute__((visibility("default"))) unsigned pcpu_version(void) { return 0; }
