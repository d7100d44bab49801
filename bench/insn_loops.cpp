// SPDX-License-Identifier: MIT
// The loops of insn_loops.c written with pcpu.hpp, beside the same loops
// on the C API compiled as C++ in this file: bench/loop_insns.py counts
// each, and tests/cxx (cxx_loop_insns) requires the C++ wrappers' loops to
// have exactly the C loops' instructions and loads. Not built by CMake's
// bench targets: the test (tests/cxx/loop_insns.cmake) compiles it into a
// shared object.
#include <pcpu/pcpu.hpp>

extern "C" {

void c_inc_loop(pcpu_counter_t c, long n)
{
	for (long i = 0; i < n; i++)
		pcpu_counter_inc(c);
}

// An owning counter reached through a reference: its handle is reloaded
// after each section (the asm's memory clobber), as C reloads s->c.
void c_inc_loop_indirect(const pcpu_counter_t *c, long n)
{
	for (long i = 0; i < n; i++)
		pcpu_counter_inc(*c);
}

void cxx_inc_loop_indirect(const pcpu::counter &c, long n)
{
	for (long i = 0; i < n; i++)
		c.inc();
}

// An owning counter local to the loop's function: the handle stays in a
// register, as in C.
void cxx_inc_loop_local(long n)
{
	pcpu::counter c;
	for (long i = 0; i < n; i++)
		c.inc();
}

void cxx_ref_inc_loop(pcpu::counter_ref c, long n)
{
	for (long i = 0; i < n; i++)
		c.inc();
}

void c_add_loop(pcpu_counter_t c, const std::int64_t *v, long n)
{
	for (long i = 0; i < n; i++)
		pcpu_counter_add(c, v[i]);
}

void cxx_add_loop(pcpu::counter_ref c, const std::int64_t *v, long n)
{
	for (long i = 0; i < n; i++)
		c.add(v[i]);
}

void c_gauge_loop(pcpu_gauge_t g, long n)
{
	for (long i = 0; i < n; i++)
		pcpu_gauge_inc(g);
}

void cxx_gauge_loop(pcpu::gauge_ref g, long n)
{
	for (long i = 0; i < n; i++)
		g.inc();
}

void c_record_loop(const pcpu_histogram_t *h, const std::int64_t *v, long n)
{
	for (long i = 0; i < n; i++)
		pcpu_histogram_record(h, v[i]);
}

void cxx_record_loop(pcpu::histogram_ref h, const std::int64_t *v, long n)
{
	for (long i = 0; i < n; i++)
		h.record(v[i]);
}

void c_group_loop(const pcpu_group_t *g, long n)
{
	for (long i = 0; i < n; i++)
		pcpu_group_add2(g, 0, 1, 1500);
}

void cxx_group_loop(pcpu::group_ref g, long n)
{
	for (long i = 0; i < n; i++)
		g.add2(0, 1, 1500);
}

void c_owned_add_loop(pcpu_worker_t w, pcpu_counter_t c, long n)
{
	for (long i = 0; i < n; i++)
		pcpu_counter_add_owned(w, c, 1);
}

void cxx_owned_add_loop(pcpu::claim w, pcpu::counter_ref c, long n)
{
	for (long i = 0; i < n; i++)
		w.inc(c);
}

void c_owned_array_loop(pcpu_owned_array_t a, const std::int64_t *v, long n)
{
	for (long i = 0; i < n; i++) {
		pcpu_owned_array_add(a, 0, 1);
		pcpu_owned_array_add(a, 1, v[i]);
	}
}

void cxx_owned_array_loop(pcpu::owned_array a, const std::int64_t *v, long n)
{
	for (long i = 0; i < n; i++) {
		a.add(0, 1);
		a.add(1, v[i]);
	}
}

} // extern "C"
