// The installed C++ API (pcpu/pcpu.hpp), C++17.
#include <pcpu/pcpu.hpp>
#include <cstdio>

int main()
{
	pcpu::registry reg;
	auto hits = reg.counter_family("consumer_hits").labels({"page"}).make();
	pcpu::counter_ref home = hits.series({"home"});
	for (int i = 0; i < 1000; i++)
		home.inc();
	bool ok = home.fetch() == 1000 && reg.write().find("consumer_hits_total{page=\"home\"} 1000\n") != std::string::npos;
	std::printf("installed pcpu.hpp: %s\n", ok ? "ok" : "WRONG");
	return ok ? 0 : 1;
}
