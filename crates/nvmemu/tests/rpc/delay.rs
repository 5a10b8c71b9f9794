// SPDX-License-Identifier: Apache-2.0
//! SPDK's delay bdev end to end: a namespace on `bdev_delay_create`'s bdev holds each
//! command for the bdev's latency, and `bdev_delay_update_latency` changes it while the
//! host does I/O (from the poller's next pass: a command taken by a pass that began before
//! the update still gets the old latency).

use super::*;

/// Seconds one 8-block read of namespace 1 takes, and that it succeeded with the data.
fn timed_read(q: &mut nvmemu_driver::IoQpair, buf: &nvmemu_driver::DmaBuf, want: &[u8]) -> f64 {
    let start = Instant::now();
    q.read_blocking(Nsid(1), Lba(0), 8, buf).expect("read");
    let took = start.elapsed().as_secs_f64();
    let mut got = vec![0u8; want.len()];
    buf.copy_to(0, &mut got).expect("copy the data");
    assert!(got == want, "the read brought other data");
    took
}

/// Lower bounds only: a loaded machine makes a command later, never earlier.
#[test]
fn a_delay_bdev_holds_commands_for_its_latency_and_an_update_applies_to_later_ones() {
    let s = Server::start(&[]);
    s.ok(&["framework_wait_init"]);
    s.ok(&["bdev_malloc_create", "16", "512", "-b", "Malloc0"]);
    // Reads 1 us, writes 40 ms (average and p99).
    let delay: Vec<&str> = "bdev_delay_create -b Malloc0 -d Delay0 -r 1 -t 1 -w 40000 -n 40000"
        .split(' ')
        .collect();
    assert_eq!(s.ok(&delay), "Delay0\n");
    s.export("Delay0");
    let mut c = attach(&s.traddr());
    let mut q = c.take_qpair().expect("an I/O queue pair");
    let buf = c.alloc_dma(4096).expect("a DMA buffer");
    let data: Vec<u8> = (0..4096u32).map(|i| (i / 512 + i * 7) as u8).collect();
    buf.copy_from(0, &data).expect("fill the buffer");

    let start = Instant::now();
    q.write_blocking(Nsid(1), Lba(0), 8, &buf).expect("write");
    let write = start.elapsed().as_secs_f64();
    assert!(
        write >= 0.040,
        "a write took {write} s, its latency is 40 ms"
    );
    buf.copy_from(0, &[0u8; 4096]).expect("clear the buffer");
    timed_read(&mut q, &buf, &data);

    // avg 1 us stays under the new p99 at each step, as SPDK requires.
    s.ok(&["bdev_delay_update_latency", "Delay0", "p99_read", "60000"]);
    s.ok(&["bdev_delay_update_latency", "Delay0", "avg_read", "60000"]);
    // Taken, perhaps, by a pass that began before the update.
    timed_read(&mut q, &buf, &data);
    // Taken by a pass that began after the read before it was submitted.
    let read = timed_read(&mut q, &buf, &data);
    assert!(
        read >= 0.060,
        "a read took {read} s after the update to 60 ms"
    );
    drop(q);
    c.shutdown().expect("shutdown");
}
