// Package pcpureceiver is an OpenTelemetry Collector receiver that reads
// pcpu statistics segments (docs/segment-format.md) straight from their
// directory with the pure-Go reader of package segment -- no cgo, no
// pcpustat process -- and turns every segment into OTLP metrics at each
// collection: counters as cumulative monotonic sums, gauges, histograms
// (the `le` buckets the C writers expose), exponential histograms, each
// slot's part on request, and pcpu_segment_up with a reason per segment.
package pcpureceiver

import (
	"context"

	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/consumer"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/scraper"
	"go.opentelemetry.io/collector/scraper/scraperhelper"
)

// Type is the receiver's name in a collector configuration: `pcpu`.
var Type = component.MustNewType("pcpu")

// NewFactory returns the receiver's factory, for a collector's
// components (ocb's builder configuration names this package).
func NewFactory() receiver.Factory {
	return receiver.NewFactory(Type, func() component.Config { return createDefaultConfig() },
		receiver.WithMetrics(createMetrics, component.StabilityLevelAlpha))
}

func createMetrics(_ context.Context, set receiver.Settings, cfg component.Config, next consumer.Metrics) (receiver.Metrics, error) {
	c := cfg.(*Config)
	col := newCollector(c)
	sc, err := scraper.NewMetrics(col.scrape)
	if err != nil {
		return nil, err
	}
	return scraperhelper.NewMetricsController(&c.ControllerConfig, set, next,
		scraperhelper.AddMetricsScraper(Type, sc))
}
