"""Checks pcpu's expositions with independent parsers.

- expose.om:   prometheus_client's OpenMetrics parser (strict: # EOF, le
               canonical +Inf, histogram rules, unit suffixes, clashes).
- expose.prom: prometheus_client's Prometheus text parser.
- expose.json: json.loads.
Every sample must be the same in the three, label values must round-trip
exactly (hostile ones included), and a few known values are checked.
"""
import json
import math
import sys

from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families as parse_prom

HOSTILE = 'a "quoted" \\back\\slash\\\nnew line\t tab \u00fc \u65e5\u672c \U0001F680 }{='+','


def fail(msg):
    print("FAIL:", msg, file=sys.stderr)
    sys.exit(1)


def samples(families):
    out = {}
    for f in families:
        for s in f.samples:
            if s.name.endswith("_created"):
                continue
            key = (s.name, tuple(sorted(s.labels.items())))
            if key in out:
                fail("duplicate sample %r" % (key,))
            out[key] = float(s.value)
    return out


def json_samples(doc):
    out = {}
    for f in doc["families"]:
        name, typ = f["name"], f["type"]
        for m in f["metrics"]:
            labels = tuple(sorted(m["labels"].items()))
            if typ == "counter":
                out[(name + "_total", labels)] = float(m["value"])
            elif typ == "gauge":
                out[(name, labels)] = float(m["value"])
            else:
                out[(name + "_count", labels)] = float(m["count"])
                out[(name + "_sum", labels)] = float(m["sum"])
                for b in m["buckets"]:
                    lab = dict(m["labels"])
                    lab["le"] = b["le"]  # a number, or the string "+Inf"
                    out[(name + "_bucket", tuple(sorted(lab.items())))] = float(b["count"])
    return out


def norm_le(d):
    """Compares le as numbers (JSON gives numbers, text gives strings)."""
    out = {}
    for (name, labels), v in d.items():
        labels = tuple((k, float(x) if k == "le" else x) for k, x in labels)
        out[(name, labels)] = v
    return out


def main():
    d = sys.argv[1]
    om_text = open(d + "/expose.om", encoding="utf-8").read()
    prom_text = open(d + "/expose.prom", encoding="utf-8").read()
    doc = json.load(open(d + "/expose.json", encoding="utf-8"))

    try:
        om_fams = list(parse_om(om_text))
    except Exception as e:  # the parser raises ValueError and friends
        fail("OpenMetrics parser rejected expose.om: %r" % e)
    om = samples(om_fams)
    prom = samples(parse_prom(prom_text))
    js = json_samples(doc)

    if norm_le(om) != norm_le(prom):
        fail("OpenMetrics and 0.0.4 samples differ:\n%s\n%s" % (
            sorted(set(norm_le(om).items()) ^ set(norm_le(prom).items()))[:10], ""))
    if norm_le(om) != norm_le(js):
        fail("OpenMetrics and JSON samples differ: %s" % (
            sorted(set(norm_le(om).items()) ^ set(norm_le(js).items()))[:10],))

    types = {f.name: (f.type, f.unit, f.documentation) for f in om_fams}
    expect_types = {
        "http_requests": "counter", "queue_depth": "gauge",
        "request_duration_seconds": "histogram", "payload_bytes": "histogram",
        "ep_packets": "counter", "idle_workers": "gauge", "app_build": "info",
    }
    for name, typ in expect_types.items():
        if types.get(name, (None,))[0] != typ:
            fail("family %s: type %r, expected %s" % (name, types.get(name), typ))
    if types["request_duration_seconds"][1] != "seconds":
        fail("unit of request_duration_seconds lost")
    if types["queue_depth"][2] != 'Help with \\backslash, "quotes" and a\nnewline \u2014 \u00fc.':
        fail("help text did not round-trip: %r" % types["queue_depth"][2])

    checks = {
        ("http_requests_total", (("method", "POST"), ("path", HOSTILE))): 3,
        ("http_requests_total", (("method", "GET"), ("path", "\u00fc/\u65e5\u672c\u8a9e/\U0001F680"))): 7,
        ("queue_depth", (("queue", 'tx"\\\n'),)): 12,
        ("queue_depth", (("queue", "rx"),)): -5,
        ("request_duration_seconds_bucket", (("handler", "/api"), ("le", "0.005"))): 2,
        ("request_duration_seconds_bucket", (("handler", "/api"), ("le", "+Inf"))): 5,
        ("request_duration_seconds_sum", (("handler", "/api"),)): 20.133000001,
        ("request_duration_seconds_count", (("handler", HOSTILE),)): 3,
        ("process_cpu_seconds_total", ()): 1.234567891,
        ("small_ratio", ()): 1e-05,
        ("temperature_celsius", ()): -273.5,
        ("plain_events_total", ()): 18446744073709551615.0,
        ("ep_bytes_total", (("iface", "eth0"),)): 15000,
        ("app_build_info", (("revision", HOSTILE), ("version", "1.2.3"))): 1,
        ("app_build_info", (("revision", "def"), ("version", "1.2.4"))): 1,
    }
    for key, want in checks.items():
        got = om.get(key)
        if got is None or got != want:
            fail("sample %r: got %r, want %r" % (key, got, want))
    for key, v in om.items():
        if math.isnan(v):
            fail("NaN sample %r" % (key,))
    print("OpenMetrics (strict), 0.0.4 and JSON agree: %d families, %d samples"
          % (len(om_fams), len(om)))


main()
