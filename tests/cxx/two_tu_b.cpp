// SPDX-License-Identifier: MIT
// The other unit of the two-unit program (two_tu_a.cpp says why).
#include <pcpu/pcpu.hpp>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <cstdio>

void use_a(pcpu::counter_ref c, const pcpu::histogram &h, prometheus::Counter &pc, prometheus::Gauge &pg,
	   prometheus::Histogram &ph);

int main()
{
	pcpu::counter c;
	pcpu::histogram h(pcpu::histogram_layout::explicit_bounds({10}));
	prometheus::Counter pc;
	prometheus::Gauge pg;
	prometheus::Histogram ph({1, 2});
	use_a(c.ref(), h, pc, pg, ph);
	c.inc();
	h.record(50);
	pc.Increment();
	pg.Increment(2);
	pg.Decrement();
	ph.Observe(0.5);
	bool ok = c.fetch() == 2 && h.read().count == 2 && pc.Value() == 2.5 && pg.Value() == 2.0 &&
		  ph.Collect().histogram.sample_count == 2;
	std::printf("two units: %s\n", ok ? "ok" : "WRONG");
	return ok ? 0 : 1;
}
