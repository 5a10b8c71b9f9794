# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=sh
#
# Guest side of the latency table (tests/e2e/qemu.sh latency, scripts/guest-latency.sh):
# a QD1 fio job on namespace 1 with the kernel's block, nvme and irq trace events on.
# Prints "E2E-LAT mark=start" before and "E2E-LAT mark=stop" after the job (the host reads
# the target's counters at those marks; the guest stays idle for LAT_SETTLE seconds around
# them), then one line of means:
#   E2E-LAT fio_lat_ns=.. fio_ios=.. block_n=.. block_ns=.. rq_n=.. rq_ns=.. nvme_n=..
#           nvme_ns=.. irq_n=.. setup_to_irq_ns=.. irq_to_done_ns=..
# block_ns: block_bio_queue -> block_rq_complete (the block layer's whole span; the nvme
# driver's nvme_setup_cmd comes before block_rq_issue, inside queue_rq, so the request's
# issue-to-complete span, rq_ns, does not contain the driver's); nvme_ns: nvme_setup_cmd ->
# nvme_complete_rq; setup_to_irq_ns: nvme_setup_cmd -> the queue's irq_handler_entry;
# irq_to_done_ns: that interrupt -> nvme_complete_rq. Sourced by checks.sh (ok/fail).

# lat_parse: the trace (stdin, trace_clock mono: seconds with microseconds) to the means.
lat_parse() {
    awk '
    function ts_of(   i) { for (i = 1; i <= NF; i++) if ($i ~ /^[0-9]+\.[0-9]+:$/) return substr($i, 1, length($i) - 1); return "" }
    function field(name,   i, v) {
        for (i = 1; i <= NF; i++) if (index($i, name "=") == 1) { v = substr($i, length(name) + 2); sub(/,$/, "", v); return v }
        return ""
    }
    function sector(   i) { for (i = 2; i <= NF; i++) if ($i == "+") return $(i - 1); return "" }
    {
        t = ts_of(); if (t == "") next
        if ($0 ~ /block_bio_queue:/) { s = sector(); if (s != "") bq[s] = t }
        else if ($0 ~ /block_rq_issue:/) { s = sector(); if (s != "") bi[s] = t }
        else if ($0 ~ /block_rq_complete:/) {
            s = sector()
            if (s in bq) { bsum += t - bq[s]; bn++; delete bq[s] }
            if (s in bi) { rsum += t - bi[s]; rn++; delete bi[s] }
        }
        else if ($0 ~ /nvme_setup_cmd:/) { q = field("qid"); k = q "/" field("cmdid"); ns[k] = t; pend[q] = k }
        else if ($0 ~ /irq_handler_entry:/) {
            n = field("name"); q = n; sub(/^nvme[0-9]+q/, "", q)
            if ((q in pend) && pend[q] != "") { k = pend[q]; irq[k] = t; pend[q] = "" }
        }
        else if ($0 ~ /nvme_complete_rq:/) {
            k = field("qid") "/" field("cmdid")
            if (k in ns) {
                nsum += t - ns[k]; nn++
                if (k in irq) { isum += irq[k] - ns[k]; dsum += t - irq[k]; in_++; delete irq[k] }
                delete ns[k]
            }
        }
    }
    function mean(s, n) { return n ? sprintf("%.0f", s * 1e9 / n) : 0 }
    END {
        printf "block_n=%d block_ns=%s rq_n=%d rq_ns=%s nvme_n=%d nvme_ns=%s irq_n=%d setup_to_irq_ns=%s irq_to_done_ns=%s\n", \
            bn, mean(bsum, bn), rn, mean(rsum, rn), nn, mean(nsum, nn), in_, mean(isum, in_), mean(dsum, in_)
    }'
}

measure_latency() {
    tr=/sys/kernel/tracing
    [ -d "$tr/events" ] || mount -t tracefs nodev "$tr" 2>/dev/null
    if [ ! -d "$tr/events/nvme" ]; then
        fail "tracefs with nvme events at $tr"
        return
    fi
    echo 0 >"$tr/tracing_on"
    echo mono >"$tr/trace_clock"
    echo "${LAT_BUFFER_KB:-16384}" >"$tr/buffer_size_kb"
    : >"$tr/trace"
    for e in nvme/nvme_setup_cmd nvme/nvme_complete_rq block/block_bio_queue \
        block/block_rq_issue block/block_rq_complete irq/irq_handler_entry; do
        echo 1 >"$tr/events/$e/enable" || fail "trace event $e"
    done
    echo 'name ~ "nvme*"' >"$tr/events/irq/irq_handler_entry/filter"
    sync
    echo "E2E-LAT mark=start"
    sleep "${LAT_SETTLE:-3}"
    echo 1 >"$tr/tracing_on"
    out=$(fio --name=qd1 --filename="$NS1" --ioengine=libaio --direct=1 --rw=randread --bs=4k \
        --iodepth=1 --numjobs=1 --time_based --runtime="${LAT_SECONDS:-3}" --size=64M \
        --output-format=terse --terse-version=3 2>&1)
    rc=$?
    echo 0 >"$tr/tracing_on"
    echo "E2E-LAT mark=stop"
    sleep "${LAT_SETTLE:-3}"
    if [ "$rc" -ne 0 ]; then
        echo "$out" | tail -20
        fail "QD1 fio for the latency table"
        return
    fi
    # terse v3: field 6 read KiB, field 40 read total latency mean (usec).
    last=$(echo "$out" | tail -1)
    kib=$(echo "$last" | cut -d';' -f6)
    lat_us=$(echo "$last" | cut -d';' -f40)
    means=$(lat_parse <"$tr/trace")
    for e in nvme/nvme_setup_cmd nvme/nvme_complete_rq block/block_bio_queue \
        block/block_rq_issue block/block_rq_complete irq/irq_handler_entry; do
        echo 0 >"$tr/events/$e/enable"
    done
    : >"$tr/trace"
    echo "E2E-LAT fio_lat_ns=$(awk -v u="$lat_us" 'BEGIN { printf "%.0f", u * 1000 }') fio_ios=$((kib / 4)) $means"
    case $means in
    *"block_n=0 "* | *"nvme_n=0 "* | *"irq_n=0 "*) fail "latency trace: no nvme command or interrupt paired ($means)" ;;
    *) ok "QD1 latency trace: $means" ;;
    esac
}
