// SPDX-License-Identifier: MIT
// label_pairs.sh: each -DBAD=... expression (or -DBAD_EXPOSER) must not
// compile; without it, this unit compiles (the check that the failures are
// the expressions' own).
#include <pcpu/pcpu.hpp>
#ifdef BAD_EXPOSER
#include <prometheus/exposer.h>
#endif

void bad(pcpu::registry &reg, const pcpu::family<pcpu::counter_ref> &requests)
{
	(void)reg;
	(void)requests;
#ifdef BAD
	(void)BAD;
#endif
#ifdef BAD_EXPOSER
	prometheus::Exposer exposer({{"listening_ports", "127.0.0.1:0"}});
#endif
}
