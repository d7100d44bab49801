// Uses the inline API from C++ (the headers are also compiled one by one as
// C and C++ by the generated sources beside this file).
#include <pcpu/pcpu.h>
#include <pcpu/counter9.h>
#include <cstdio>

int main()
{
	pcpu_counter_t c = pcpu_counter_alloc();
	if (!c)
		return 1;
	pcpu_counter_add(c, 41);
	pcpu_counter_inc(c);
	pcpu_counter_t cs[2] = {c, c};
	const int64_t vs[2] = {1, -1};
	pcpu_counter_add_many(cs, vs, 2);
	counter_u64_t k = counter_u64_alloc(M_WAITOK);
	counter_u64_add(k, 7);
	bool ok = pcpu_counter_fetch(c) == 42 && counter_u64_fetch(k) == 7;
	std::printf("headers from C++: %s\n", ok ? "ok" : "WRONG");
	return ok ? 0 : 1;
}
