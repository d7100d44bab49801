// SPDX-License-Identifier: MIT
// pcpu's prometheus-cpp compatibility layer: what pcpu adds to
// prometheus-cpp's API. Not a prometheus-cpp header.
#pragma once

#include <pcpu/stats.h>

#include "prometheus/detail/core_export.h"
#include "prometheus/registry.h"

namespace prometheus {

/// The pcpu statistics registry that `registry` is (pcpu/stats.h): its
/// families and series are those of `registry` (detail::PcpuFamily says
/// which), so that
///     pcpu_segment_publish(prometheus::PcpuRegistry(reg), "myapp", nullptr)
/// publishes them for pcpustat, `pcpustat serve` and the Python reader
/// (call it before the first Add(): pcpu_segment_publish() needs a
/// registry without series yet; families registered are fine),
/// and pcpu_registry_write() exposes them in pcpu's formats (where a
/// counter is named with `_total` and values show to 1e-9: see
/// detail::PcpuValue). Owned by `registry`: valid until it is destroyed;
/// never pass it to pcpu_registry_destroy(). The C registry may hold
/// families of its own beside the layer's (pcpu_registry_family(),
/// pcpu_registry_process_collector()): pcpu's expositions show them,
/// Registry::Collect() does not. Never fails; thread-safe; cost: a load.
PROMETHEUS_CPP_CORE_EXPORT pcpu_registry_t* PcpuRegistry(const Registry& registry);

}  // namespace prometheus
