#!/usr/bin/env python3
"""The protobuf exposition, decoded by an independent decoder, equals the text.

  check_protobuf.py TEST_EXPOSE PROTO OUTDIR

test_expose --out writes the golden registry's expositions (expose.prom,
and expose.pb: PCPU_FORMAT_PROTOBUF). protoc compiles the schema
(src/stats/proto/metrics.proto) for Python's protobuf package, which
decodes the length-delimited MetricFamily messages; prometheus_client's
parser reads the 0.0.4 text. Every sample -- name, labels, value; a
histogram's buckets, count and sum -- must be the same in both, and the
families the same with the same help and type.
"""
import math
import os
import subprocess
import sys

from prometheus_client.parser import text_string_to_metric_families


def check_native(name, h):
    """A native histogram's buckets (zero bucket, spans, deltas) against its
    classic buckets: at each classic `le` -- a native bound
    floor(2^(i * 2^-schema)), the test's native families having scale 0 --
    the cumulative native count must equal the classic one, and the native
    total the sample count."""
    counts, idx = {}, 0
    prev = 0
    deltas = iter(h.positive_delta)
    for sp in h.positive_span:
        idx += sp.offset
        for _ in range(sp.length):
            prev += next(deltas)
            if prev < 0:
                raise SystemExit("FAIL: %s: negative native bucket count" % name)
            counts[idx] = prev
            idx += 1
    if next(deltas, None) is not None or h.negative_span or h.negative_delta:
        raise SystemExit("FAIL: %s: deltas do not match the spans" % name)
    if h.zero_count + sum(counts.values()) != h.sample_count:
        raise SystemExit("FAIL: %s: native total %d != sample_count %d"
                         % (name, h.zero_count + sum(counts.values()), h.sample_count))
    classic = {b.upper_bound: b.cumulative_count for b in h.bucket}
    checked = 0
    for le, cum in classic.items():
        if le <= h.zero_threshold:
            if cum != h.zero_count:
                raise SystemExit("FAIL: %s: le=%g %d, zero bucket %d" % (name, le, cum, h.zero_count))
            checked += 1
            continue
        # Every classic `le` is a native bound: the native buckets at or
        # below it hold exactly the classic cumulative count.
        below = [i for i in counts if math.floor(2 ** (i * 2.0 ** -h.schema)) <= le]
        native = h.zero_count + sum(counts[i] for i in below)
        if native != cum:
            raise SystemExit("FAIL: %s: le=%g classic %d, native %d" % (name, le, cum, native))
        checked += 1
    return checked


def main():
    test_expose, proto, outdir = sys.argv[1:4]
    os.makedirs(outdir, exist_ok=True)
    subprocess.run([test_expose, "--out", outdir], check=True, stdout=subprocess.DEVNULL)
    # The schema imports protobuf-c's options (C names only): compile both.
    subprocess.run(["protoc", "--python_out=" + outdir, "--proto_path=" + os.path.dirname(proto),
                    "--proto_path=/usr/include", os.path.basename(proto),
                    "protobuf-c/protobuf-c.proto"], check=True)
    sys.path.insert(0, outdir)
    import metrics_pb2  # noqa: E402
    from google.protobuf.internal.decoder import _DecodeVarint32  # noqa: E402

    data = open(os.path.join(outdir, "expose.pb"), "rb").read()
    pos, fams = 0, []
    while pos < len(data):
        n, pos = _DecodeVarint32(data, pos)
        mf = metrics_pb2.MetricFamily()
        mf.ParseFromString(data[pos:pos + n])
        # Byte for byte what protobuf serializes (fields in field-number
        # order): the writer packs a family in pieces (expose_protobuf.c).
        if mf.SerializeToString() != data[pos:pos + n]:
            raise SystemExit("FAIL: family %s: not the bytes protobuf serializes" % mf.name)
        pos += n
        fams.append(mf)
    if pos != len(data):
        raise SystemExit("FAIL: trailing bytes after the last message")

    kinds = {metrics_pb2.COUNTER: "counter", metrics_pb2.GAUGE: "gauge",
             metrics_pb2.HISTOGRAM: "histogram"}
    pb = {}
    meta_pb = {}
    natives = 0
    for mf in fams:
        kind = kinds[mf.type]
        base = mf.name[:-6] if kind == "counter" and mf.name.endswith("_total") else mf.name
        meta_pb[base] = (kind, mf.help if mf.HasField("help") else None)
        for m in mf.metric:
            labels = tuple(sorted((lp.name, lp.value) for lp in m.label))
            if kind == "counter":
                pb[(mf.name, labels)] = m.counter.value
            elif kind == "gauge":
                pb[(mf.name, labels)] = m.gauge.value
            else:
                h = m.histogram
                for b in h.bucket:
                    le = ("le", repr(b.upper_bound))
                    pb[(mf.name + "_bucket", tuple(sorted(labels + (le,))))] = b.cumulative_count
                pb[(mf.name + "_bucket", tuple(sorted(labels + (("le", "inf"),))))] = h.sample_count
                pb[(mf.name + "_count", labels)] = h.sample_count
                pb[(mf.name + "_sum", labels)] = h.sample_sum
                if h.HasField("schema"):
                    natives += check_native(mf.name, h)

    text = open(os.path.join(outdir, "expose.prom"), encoding="utf-8").read()
    tx = {}
    meta_tx = {}
    for fam in text_string_to_metric_families(text):
        meta_tx[fam.name] = (fam.type, fam.documentation or None)
        for s in fam.samples:
            labels = dict(s.labels)
            if "le" in labels:
                labels["le"] = repr(float(labels["le"]))
            tx[(s.name, tuple(sorted(labels.items())))] = s.value

    bad = 0
    for k in sorted(set(pb) | set(tx)):
        a, b = pb.get(k), tx.get(k)
        # Protobuf values are doubles: the text's integers compare as the
        # nearest double (2^64 - 1 is 1.8446744073709552e19 in both).
        if a is None or b is None or not (float(a) == float(b) or
                                          (math.isnan(a) and math.isnan(b))):
            print("FAIL: %s%s: protobuf %r, text %r" % (k[0], dict(k[1]), a, b))
            bad += 1
    for name in sorted(set(meta_pb) | set(meta_tx)):
        a, b = meta_pb.get(name), meta_tx.get(name)
        # prometheus_client reports an absent HELP as "".
        if a is None or b is None or a[0] != b[0] or (a[1] or None) != (b[1] or None):
            print("FAIL: family %s: protobuf %r, text %r" % (name, a, b))
            bad += 1
    if bad:
        raise SystemExit("check_protobuf: %d differences" % bad)
    if not natives:
        raise SystemExit("FAIL: no native histogram checked")
    print("check_protobuf: ok, %d families, %d samples equal in protobuf and text; "
          "%d classic buckets equal to the native ones" % (len(fams), len(pb), natives))


if __name__ == "__main__":
    main()
