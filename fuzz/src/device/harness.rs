// SPDX-License-Identifier: Apache-2.0
//! The server side (control thread, poller state on this thread) and one client
//! connection, with the reply invariant checked on every request.

use std::os::fd::BorrowedFd;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nvmemu_bdev::Bdev;
use nvmemu_ctrl::{Controller, ControllerConfig, Namespace};
use nvmemu_device::irq::MsixSink;
use nvmemu_device::mailbox::Mailbox;
use nvmemu_device::poller::{PolledController, PollerState};
use nvmemu_device::{ControllerId, Deadlines, NvmeFunction, create_doorbells};
use nvmemu_spec::Nsid;
use nvmemu_vfio_user::wire::{DeviceInfoWire, msg_flags};
use nvmemu_vfio_user::{Client, Command, Header, RawReply, StopHandle};
use rustix::event::{PollFd, PollFlags, Timespec};
use zerocopy::{FromBytes, IntoBytes};

/// Blocks of the namespace (512 bytes each).
pub const BLOCKS: u64 = 256;
/// Longest the harness waits for one reply before calling the server wedged: far above
/// anything a loaded machine needs (a niced long run beside CI gets a few percent of a CPU:
/// 20 s once stopped a run on an input that replays in 57 ms), far below libFuzzer's own
/// 1200 s timeout.
const REPLY_LIMIT: Duration = Duration::from_secs(120);

/// The server of one fuzz input, and the client connected to it.
pub struct Harness {
    /// The poller's state: the one controller, run on this thread.
    pub poller: PollerState,
    mailbox: Arc<Mailbox<PollerState>>,
    streams: Option<mpsc::Sender<UnixStream>>,
    control: Option<JoinHandle<()>>,
    client: Option<Client>,
    next_id: u16,
}

impl Harness {
    /// A fresh controller with one malloc namespace, its control thread waiting for a
    /// connection.
    pub fn start() -> Harness {
        let (doorbell_fd, doorbells) = create_doorbells().expect("doorbell page");
        let config = ControllerConfig {
            max_io_queues: 4,
            ..ControllerConfig::default()
        };
        let vectors = config.msix_vectors;
        let mut ctrl = Controller::new(config, doorbells.clone());
        let bdev = Bdev::malloc("fuzz", 512, BLOCKS).expect("malloc bdev");
        ctrl.attach_namespace(Namespace::new(Nsid(1), Arc::new(bdev)))
            .expect("namespace");
        let id = ControllerId(1);
        let mailbox: Arc<Mailbox<PollerState>> = Arc::default();
        mailbox.set_poller(std::thread::current());
        // No call may time out on a loaded machine: a timeout drops the client mid-sequence.
        let mut function = NvmeFunction::new(
            id,
            mailbox.clone(),
            doorbell_fd,
            doorbells,
            vectors,
            Duration::from_secs(60),
        );
        let (streams, incoming) = mpsc::channel::<UnixStream>();
        let control = std::thread::spawn(move || {
            let stop = StopHandle::new().expect("stop handle");
            for stream in incoming {
                let _ = nvmemu_vfio_user::serve_connection(
                    stream,
                    &mut function,
                    &stop,
                    &Deadlines::default(),
                );
            }
        });
        Harness {
            poller: PollerState {
                controllers: vec![PolledController {
                    id,
                    ctrl,
                    irq: MsixSink::default(),
                }],
            },
            mailbox,
            streams: Some(streams),
            control: Some(control),
            client: None,
            next_id: 0,
        }
    }

    /// Close the current connection (if any) and open a new one, VERSION not yet sent.
    pub fn connect(&mut self) {
        self.disconnect();
        let (ours, theirs) = UnixStream::pair().expect("socketpair");
        self.streams
            .as_ref()
            .expect("running")
            .send(theirs)
            .expect("control thread alive");
        self.client = Some(Client::unnegotiated(ours, REPLY_LIMIT).expect("client"));
        self.next_id = 0;
    }

    /// Close the connection; the server resets the controller when it sees the EOF (the
    /// mailbox calls that needs run while the next request waits, or in [`Self::finish`]).
    pub fn disconnect(&mut self) {
        self.client = None;
    }

    /// Run the poller: pending mailbox calls, then controller passes until one is idle.
    pub fn poll(&mut self) -> usize {
        self.mailbox.run_pending(&mut self.poller);
        let mut done = 0;
        for _ in 0..8 {
            let mut work = 0;
            for c in &mut self.poller.controllers {
                work += c.ctrl.poll(&mut c.irq);
            }
            if work == 0 {
                break;
            }
            done += work;
        }
        done
    }

    /// Send `payload` as `command` with `flags`; returns the reply when one is due.
    pub fn request(
        &mut self,
        command: Command,
        flags: u32,
        payload: &[u8],
        fds: &[BorrowedFd<'_>],
    ) -> Option<RawReply> {
        let size = u32::try_from(16 + payload.len()).expect("small payload");
        let mut bytes = self.header(command.raw(), size, flags).as_bytes().to_vec();
        bytes.extend_from_slice(payload);
        self.send(&bytes, fds)
    }

    /// A header with the next message id.
    pub fn header(&mut self, command: u16, msg_size: u32, flags: u32) -> Header {
        let msg_id = self.next_id;
        self.next_id = self.next_id.wrapping_add(1);
        Header {
            msg_id,
            command,
            msg_size,
            flags,
            error: 0,
        }
    }

    /// Send `bytes`, a whole message starting with a header from [`Self::header`].
    ///
    /// The invariant: a message that wants a reply (a command without NO_REPLY, or a
    /// message of an unknown type) gets exactly one, carrying its msg_id and command, and
    /// the connection stays open (every message here is complete, so the server has no
    /// reason to close it). A message that wants none is followed by a ping whose reply
    /// must be the next message, so a stray reply is caught too.
    pub fn send(&mut self, bytes: &[u8], fds: &[BorrowedFd<'_>]) -> Option<RawReply> {
        let (header, _) = Header::read_from_prefix(bytes).expect("a whole header");
        self.client
            .as_mut()
            .expect("connected")
            .raw_send(bytes, fds)
            .expect("the server takes every complete message");
        if header.msg_type() != msg_flags::TYPE_REPLY && !header.no_reply() {
            Some(self.expect_reply(&header))
        } else {
            self.ping();
            None
        }
    }

    /// DEVICE_GET_INFO, which every session state answers (EINVAL before VERSION).
    pub fn ping(&mut self) {
        let info = DeviceInfoWire {
            argsz: 16,
            ..Default::default()
        };
        // `expect_reply` checks that the next message answers the ping and nothing else.
        self.request(Command::DeviceGetInfo, 0, info.as_bytes(), &[])
            .expect("a ping is answered");
    }

    fn expect_reply(&mut self, request: &Header) -> RawReply {
        self.wait_readable();
        let reply = match self.client.as_mut().expect("connected").raw_recv() {
            Ok(r) => r,
            Err(e) => panic!("request {request:?} got no reply: {e}"),
        };
        let h = reply.header;
        assert_eq!(
            h.msg_id, request.msg_id,
            "reply to the wrong message: {h:?}"
        );
        assert_eq!(
            h.command, request.command,
            "reply to the wrong command: {h:?}"
        );
        assert_eq!(h.msg_type(), msg_flags::TYPE_REPLY, "not a reply: {h:?}");
        assert_eq!(h.msg_size as usize, 16 + reply.payload.len());
        if h.flags & msg_flags::ERROR != 0 {
            assert_ne!(h.error, 0, "an error reply without an errno: {h:?}");
            assert!(reply.payload.is_empty() && reply.fds.is_empty());
        }
        reply
    }

    /// Act as the poller until the client's socket has something to read.
    fn wait_readable(&mut self) {
        let since = Instant::now();
        let mut spins = 0u32;
        loop {
            self.mailbox.run_pending(&mut self.poller);
            let client = self.client.as_ref().expect("connected");
            let fd = client.stream_fd();
            let mut fds = [PollFd::new(&fd, PollFlags::IN)];
            let wait = Timespec {
                tv_sec: 0,
                tv_nsec: if spins < 64 { 0 } else { 50_000 },
            };
            if rustix::event::poll(&mut fds, Some(&wait)).unwrap_or(0) > 0 {
                return;
            }
            spins += 1;
            if spins < 64 {
                std::thread::yield_now();
            }
            assert!(since.elapsed() < REPLY_LIMIT, "the server did not answer");
        }
    }

    /// Disconnect, let the server finish (its disconnect path calls the poller), and stop
    /// its control thread.
    pub fn finish(mut self) {
        self.disconnect();
        self.streams = None;
        let control = self.control.take().expect("running");
        let since = Instant::now();
        while !control.is_finished() {
            self.mailbox.run_pending(&mut self.poller);
            std::thread::yield_now();
            assert!(since.elapsed() < REPLY_LIMIT, "the server did not stop");
        }
        control.join().expect("control thread");
    }

    /// The client's socket (to poll it, or to hand its own fd to the server).
    pub fn client_fd(&self) -> Option<BorrowedFd<'_>> {
        self.client.as_ref().map(Client::stream_fd)
    }
}
