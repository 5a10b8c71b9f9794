// SPDX-License-Identifier: Apache-2.0
//! Raw bytes on the wire (a vfio-user connection driven byte by byte), and a transport shared
//! between the driver and the test.

use std::io::{IoSlice, IoSliceMut, Read, Write};
use std::mem::MaybeUninit;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};

use nvmemu_driver::{AttachedController, VfioUserTransport};
use nvmemu_spec::regs;
use nvmemu_vfio_user::wire::Header;
use nvmemu_vfio_user::{Client, Errno};
use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, recvmsg, sendmsg,
};
use zerocopy::{FromBytes, IntoBytes};

use super::{DEADLINE, TestTarget, opts, read32};

/// A reply as received on a raw connection.
#[derive(Debug)]
pub struct RawMsg {
    pub header: Header,
    pub payload: Vec<u8>,
    pub fds: Vec<OwnedFd>,
}

impl RawMsg {
    /// The errno of an error reply (panics if it is not one).
    pub fn errno(&self) -> Errno {
        assert!(
            self.header.is_error(),
            "expected an error reply: {:?}",
            self.header
        );
        Errno::from_raw_os_error(self.header.error as i32)
    }

    /// Asserts a successful reply to `command`.
    pub fn ok(self, command: u16) -> RawMsg {
        assert_eq!(self.header.command, command, "reply to the wrong command");
        assert!(!self.header.is_error(), "error reply {:?}", self.header);
        assert_eq!(self.header.flags & 0xF, 1, "not a reply");
        self
    }
}

/// A vfio-user connection driven byte by byte (no VERSION done for you).
pub struct RawConn {
    pub stream: UnixStream,
    next_id: u16,
}

impl RawConn {
    pub fn connect(t: &TestTarget) -> RawConn {
        let stream = UnixStream::connect(t.socket()).unwrap();
        stream.set_read_timeout(Some(DEADLINE)).unwrap();
        RawConn { stream, next_id: 1 }
    }

    /// Connect and negotiate VERSION the way SPDK's client does (minor 1, no JSON).
    pub fn connect_negotiated(t: &TestTarget) -> RawConn {
        let mut c = RawConn::connect(t);
        c.request(1, 0, &[0, 0, 1, 0]).ok(1);
        c
    }

    /// Send a command with a correct header.
    pub fn send(&mut self, command: u16, flags: u32, payload: &[u8], fds: &[BorrowedFd<'_>]) {
        let header = Header {
            msg_id: self.next_id,
            command,
            msg_size: (16 + payload.len()) as u32,
            flags,
            error: 0,
        };
        self.next_id = self.next_id.wrapping_add(1);
        let mut bytes = header.as_bytes().to_vec();
        bytes.extend_from_slice(payload);
        self.send_bytes(&bytes, fds);
    }

    /// Send arbitrary bytes (one sendmsg, fds attached to the first byte).
    pub fn send_bytes(&mut self, bytes: &[u8], fds: &[BorrowedFd<'_>]) {
        let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(16))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !fds.is_empty() {
            assert!(control.push(SendAncillaryMessage::ScmRights(fds)));
        }
        let mut sent = sendmsg(
            &self.stream,
            &[IoSlice::new(bytes)],
            &mut control,
            SendFlags::empty(),
        )
        .unwrap();
        if sent < bytes.len() {
            self.stream.write_all(&bytes[sent..]).unwrap();
            sent = bytes.len();
        }
        assert_eq!(sent, bytes.len());
    }

    /// Receive one message: the header with recvmsg (fds come with the first byte of a
    /// reply sent by one sendmsg), then the payload.
    pub fn recv(&mut self) -> RawMsg {
        let mut raw = [0u8; 16];
        let mut space = [MaybeUninit::<u8>::uninit(); rustix::cmsg_space!(ScmRights(16))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let msg = recvmsg(
            &self.stream,
            &mut [IoSliceMut::new(&mut raw)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC | RecvFlags::WAITALL,
        )
        .expect("reply arrives");
        assert_eq!(msg.bytes, 16, "short header (connection closed?)");
        let mut fds = Vec::new();
        for m in control.drain() {
            if let RecvAncillaryMessage::ScmRights(r) = m {
                fds.extend(r);
            }
        }
        let header = Header::read_from_bytes(&raw).unwrap();
        let mut payload = vec![0u8; header.msg_size as usize - 16];
        self.stream.read_exact(&mut payload).unwrap();
        RawMsg {
            header,
            payload,
            fds,
        }
    }

    /// Send a command and receive the next message.
    pub fn request(&mut self, command: u16, flags: u32, payload: &[u8]) -> RawMsg {
        self.send(command, flags, payload, &[]);
        self.recv()
    }

    /// True once the server has closed the connection (EOF within the deadline).
    pub fn closed_by_server(&mut self) -> bool {
        let mut b = [0u8; 1];
        matches!(self.stream.read(&mut b), Ok(0))
    }
}

/// DEVICE_GET_INFO payload.
pub fn device_info_payload() -> Vec<u8> {
    let mut p = 16u32.to_le_bytes().to_vec();
    p.extend_from_slice(&[0; 12]);
    p
}

/// REGION_READ / REGION_WRITE prefix.
pub fn access_payload(region: u32, offset: u64, count: u32) -> Vec<u8> {
    let mut p = offset.to_le_bytes().to_vec();
    p.extend_from_slice(&region.to_le_bytes());
    p.extend_from_slice(&count.to_le_bytes());
    p
}

// ---------------------------------------------------------------------------------------
// A transport shared between the driver and the test.

/// Our `VfioUserTransport` behind a mutex, so a test can send its own messages on the
/// driver's connection (DMA maps without fds, unmaps during I/O, SET_IRQS, config writes)
/// while the driver keeps using it for registers.
#[derive(Clone)]
pub struct SharedTransport(pub Arc<Mutex<VfioUserTransport>>);

impl SharedTransport {
    pub fn connect(t: &TestTarget) -> SharedTransport {
        let tr = VfioUserTransport::connect(&t.socket()).unwrap();
        SharedTransport(Arc::new(Mutex::new(tr)))
    }

    pub fn with_client<R>(&self, f: impl FnOnce(&mut Client) -> R) -> R {
        f(self.0.lock().unwrap().client_mut())
    }

    /// CSTS through a REGION_READ on this connection.
    pub fn csts(&self) -> u32 {
        self.with_client(|c| read32(c, regs::CSTS))
    }
}

/// Attach our driver over a shared transport.
pub fn attach_shared(t: &TestTarget, io_queues: u16) -> (AttachedController, SharedTransport) {
    let shared = SharedTransport::connect(t);
    // The driver's transport is the shared one itself (`Arc<Mutex<T>>` is a Transport).
    let c = AttachedController::attach_with(Box::new(shared.0.clone()), opts(io_queues)).unwrap();
    (c, shared)
}
