// SPDX-License-Identifier: MIT
// With two_tu_b.cpp, built at -O0 (tests/cxx/CMakeLists.txt): the C++ hot
// paths used from two translation units of one program. A pcpu section in
// an inline function that a compiler emits out of line (a COMDAT copy per
// unit; -O0 inlines nothing that is not always_inline) leaves an
// __rseq_exit_point_array entry pointing at the copy the linker discards,
// and the link fails ("defined in discarded section"): the wrappers must
// stay always inlined.
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
