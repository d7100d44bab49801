// SPDX-License-Identifier: MIT
// With two_tu_b.cpp, built at -O0 (tests/cxx/CMakeLists.txt): the C++ hot
// paths used from two translation units of one program. The wrappers are
// always inlined (their loops are the C loops: cxx_loop_insns); code of a
// program's own that a compiler emits out of line around them (a COMDAT
// copy per unit) takes its rseq sections with it (pcpu/arch/common.h),
// which tests/cxx/link_matrix.sh checks shape by shape.
#include <pcpu/pcpu.hpp>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>

void use_a(pcpu::counter_ref c, const pcpu::histogram &h, prometheus::Counter &pc, prometheus::Gauge &pg,
	   prometheus::Histogram &ph)
{
	c.inc();
	h.record(5);
	pc.Increment();
	pc.Increment(0.5);
	pg.Increment(2);
	pg.Decrement();
	ph.Observe(1.5);
}
