// SPDX-License-Identifier: MIT
// tests/cxx/no_float.sh: integers compile and count; each floating-point
// value (-DBAD=...) must stop the build with pcpu.hpp's message.
#include <pcpu/pcpu.hpp>

int main()
{
	pcpu::counter c;
	pcpu::counter_ref r = c.ref();
	pcpu::histogram h(pcpu::histogram_layout::explicit_bounds({1, 10}));
	pcpu::histogram_ref hr = h.ref();
	pcpu::gauge g;
	pcpu::group grp(2, 1);
	pcpu::claim w;

	c.add(5);
	c.add(5u);
	r.add(static_cast<short>(3));
	c.inc();
	r.add_atomic(1);
	h.record(3);
	hr.record_n(4, 2);
	g.set(-2);
	g.add(4L);
	g.sub(1);
	grp.add2(0, 1, 1500);
	w.add(r, 2);
	w.record(h, 7);
#ifdef BAD
	BAD;
#endif
	return c.fetch() == 17 && h.read().count == 4 && g.read() == 1 ? 0 : 1;
}
