package collector

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/collector/pdata/pmetric"

	"pcpu.invalid/go/internal/cfix"
	"pcpu.invalid/go/internal/otlpcmp"
)

// cpuTicks is a process's user + system time, in clock ticks (1/100 s).
func cpuTicks(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64) // field 14
	s, _ := strconv.ParseInt(f[12], 10, 64) // field 15
	return u + s
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestBenchCPU measures the CPU a collection of a segment of N series
// costs (PCPU_BENCH=1 to run; PCPU_BENCH_SERIES, default 100000;
// PCPU_BENCH_ROUNDS collections, default 20; PCPU_BENCH_INTERVAL_MS,
// default 2000): the collector built by ocb (the receiver, and the
// otlphttp exporter sending protobuf to a sink in this process, or the
// debug exporter at basic verbosity: the receiver alone, nearly) against
// `pcpustat serve` scraped at the same interval (text 0.0.4, with gzip as
// Prometheus asks for it, and without). Figure: each process's
// user + system CPU over the rounds, after one warm-up round, divided by
// the rounds. Written for bench/collector.md.
func TestBenchCPU(t *testing.T) {
	if os.Getenv("PCPU_BENCH") != "1" {
		t.Skip("a benchmark: PCPU_BENCH=1")
	}
	cfix.Need(t, "tools/pcpustat")
	series := envInt("PCPU_BENCH_SERIES", 100000)
	rounds := envInt("PCPU_BENCH_ROUNDS", 20)
	interval := time.Duration(envInt("PCPU_BENCH_INTERVAL_MS", 2000)) * time.Millisecond
	dir := t.TempDir()
	w := cfix.Start(t, []string{"PCPU_SEGMENT_DIR=" + dir}, cfix.SegWriter(t), "many", "bench", strconv.Itoa(series))
	_ = w
	bin := buildCollector(t)

	for _, exporter := range []string{"otlp_http", "debug"} {
		srv := otlpcmp.Serve(t)
		expCfg := fmt.Sprintf("  otlp_http:\n    endpoint: %s\n    compression: none\n", srv.URL)
		if exporter == "debug" {
			expCfg = "  debug:\n    verbosity: basic\n"
		}
		config := fmt.Sprintf("receivers:\n  pcpu:\n    directory: %s\n    collection_interval: %s\n    initial_delay: 0s\n"+
			"exporters:\n%sservice:\n  telemetry:\n    metrics:\n      level: none\n    logs:\n      level: warn\n"+
			"  pipelines:\n    metrics:\n      receivers: [pcpu]\n      exporters: [%s]\n", dir, interval, expCfg, exporter)
		cfgPath := filepath.Join(t.TempDir(), "otelcol.yaml")
		os.WriteFile(cfgPath, []byte(config), 0o644)
		cmd := exec.Command(bin, "--config", "file:"+cfgPath)
		cmd.Stderr = io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		var first pmetric.Metrics
		var c0 int64
		var t0 time.Time
		if exporter == "otlp_http" {
			first = <-srv.Got // warm-up round
			c0, t0 = cpuTicks(t, cmd.Process.Pid), time.Now()
			for i := 0; i < rounds; i++ {
				<-srv.Got
			}
		} else {
			time.Sleep(interval + interval/2)
			c0, t0 = cpuTicks(t, cmd.Process.Pid), time.Now()
			time.Sleep(time.Duration(rounds) * interval)
		}
		c1, el := cpuTicks(t, cmd.Process.Pid), time.Since(t0)
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		points := 0
		if exporter == "otlp_http" {
			points = first.DataPointCount()
		}
		t.Logf("collector (pcpu receiver + %s): %d series (%d points exported), %d rounds of %v in %v: %.1f ms CPU per collection",
			exporter, series, points, rounds, interval, el.Round(time.Millisecond), float64(c1-c0)*10/float64(rounds))
	}

	// pcpustat serve, scraped at the same interval.
	cmd := exec.Command(filepath.Join(cfix.BuildDir(), "tools", "pcpustat"), "serve", "-l", "127.0.0.1:0", "-d", dir)
	out, _ := cmd.StdoutPipe()
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	sc := bufio.NewScanner(out)
	url := ""
	for sc.Scan() {
		if i := strings.Index(sc.Text(), "http://"); i >= 0 {
			url = strings.Fields(sc.Text()[i:])[0]
			break
		}
	}
	if url == "" {
		t.Fatal("pcpustat serve printed no address")
	}
	if !strings.HasSuffix(url, "/metrics") {
		url = strings.TrimSuffix(url, "/") + "/metrics"
	}
	for _, gz := range []bool{true, false} {
		scrape := func() int {
			req, _ := http.NewRequest("GET", url, nil)
			if gz {
				req.Header.Set("Accept-Encoding", "gzip")
			}
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			n, _ := io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return int(n)
		}
		size := scrape() // warm-up
		c0, t0 := cpuTicks(t, cmd.Process.Pid), time.Now()
		next := t0
		for i := 0; i < rounds; i++ {
			next = next.Add(interval)
			time.Sleep(time.Until(next))
			scrape()
		}
		c1 := cpuTicks(t, cmd.Process.Pid)
		enc := "text 0.0.4 + gzip"
		if !gz {
			enc = "text 0.0.4"
		}
		t.Logf("pcpustat serve (%s, %d bytes): %d series, %d scrapes every %v in %v: %.1f ms CPU per scrape",
			enc, size, series, rounds, interval, time.Since(t0).Round(time.Millisecond), float64(c1-c0)*10/float64(rounds))
	}
}
