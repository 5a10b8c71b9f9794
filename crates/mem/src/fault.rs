// SPDX-License-Identifier: Apache-2.0
//! Survivable memory faults: a SIGBUS in a shared mapping never kills the process.
//!
//! # The problem
//! A `MAP_SHARED` mapping of a file the client controls (a memfd, a hugetlbfs file, a
//! regular file passed in `VFIO_USER_DMA_MAP`) stays valid only as long as the file is
//! long enough: once the client shrinks it (`ftruncate`), the next touch of a page past
//! the new end raises SIGBUS, whose default action kills the whole server and every
//! namespace it holds. A size check at map time cannot help; the client shrinks later.
//!
//! # The choice
//! - **Sealing where the server owns the fd.** Memfds this crate creates (the BAR0 doorbell
//!   page, driver DMA buffers) carry `F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL` (see
//!   `create_memfd`): a client's `ftruncate` of them fails with EPERM and nothing faults.
//! - **Recovery where the client owns the fd.** Requiring sealed fds would refuse SPDK's
//!   client, which maps hugetlbfs files (no seals), and QEMU's memory backends, which are
//!   unsealed memfds or files. So every `MAP_SHARED` mapping made through
//!   [`MmapRegion::map_shared`](crate::MmapRegion::map_shared) is registered here, and a
//!   process-wide SIGBUS handler recovers a fault inside a registered mapping: it maps
//!   private anonymous zero memory (`MAP_FIXED`) over the *whole* mapping at once, so the
//!   interrupted access completes harmlessly (reads see zeros, writes go nowhere), marks
//!   the mapping lost, counts the fault for the thread, and returns. A fault anywhere else
//!   goes to the previous disposition (the default: the process dies with SIGBUS, as before).
//! - **One recovery per mapping.** Replacing only the faulting page would split the mapping
//!   into three VMAs per fault: a client that truncates its file and then names every other
//!   page in PRP lists would raise the process's map count until `vm.max_map_count` made
//!   some allocation fail (SIGBUS again, unrecoverable). Replacing the whole mapping keeps it
//!   one VMA, so a mapping faults at most once; [`MmapRegion::is_lost`](crate::MmapRegion::is_lost)
//!   then reports it, and the DMA table refuses it (`DmaError::Lost`).
//! - **Reporting.** The code that touched client memory compares [`thread_faults`] before
//!   and after: the NVMe controller completes the command with Data Transfer Error and
//!   enters Controller Fatal Status; other controllers on the same poller keep serving.
//!
//! Prior art weighed: crosvm and cloud-hypervisor map guest memory they allocate
//! themselves and do not take file descriptors from an untrusted peer for it; wasmtime
//! installs a SIGSEGV/SIGBUS handler that checks whether the fault lies in a region it
//! registered (a linear memory) and recovers through a per-thread landing point. Here
//! the interrupted code does not need to unwind: replacing the page lets it finish,
//! which keeps every accessor a plain copy (no setjmp, no per-access bookkeeping).
//!
//! # Cost
//! Nothing on the access path itself. Registration is one slot claim per `map_shared`
//! (control path). The check a caller makes is one thread-local load per command.
//!
//! # Async-signal safety
//! The handler touches only atomics in static memory and one thread-local `Cell<u64>`
//! (const-initialized, no destructor, so no lazy registration or allocation) and makes two syscalls at
//! most (mmap; sigaction when chaining to the default). No allocation, no lock.

use std::cell::Cell;
use std::ffi::{c_int, c_void};
use std::ptr;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering, compiler_fence, fence};

use rustix::mm::{self, MapFlags, ProtFlags};

use crate::MemError;
use crate::memfd::os;

/// Most shared mappings registered at once (process-wide). Each slot is 32 bytes of
/// static memory; the kernel's default `vm.max_map_count` (65530) is lower anyway.
const CAPACITY: usize = 1 << 16;

/// Slot states (low two bits of `Slot::state`; the rest is a generation count, so a
/// handler reading a slot while it is reused notices the change).
const FREE: u64 = 0;
const BUSY: u64 = 1;
const LIVE: u64 = 2;
const STATE_MASK: u64 = 3;
const GENERATION: u64 = 4;

/// One registered mapping.
struct Slot {
    state: AtomicU64,
    start: AtomicUsize,
    len: AtomicUsize,
    page: AtomicUsize,
    /// A fault in the mapping was recovered: it is private zero memory now.
    lost: AtomicBool,
}

impl Slot {
    const fn new() -> Slot {
        Slot {
            state: AtomicU64::new(FREE),
            start: AtomicUsize::new(0),
            len: AtomicUsize::new(0),
            page: AtomicUsize::new(0),
            lost: AtomicBool::new(false),
        }
    }
}

static SLOTS: [Slot; CAPACITY] = [const { Slot::new() }; CAPACITY];
/// One past the highest slot ever claimed: the handler scans `[0, HIGH)`.
static HIGH: AtomicUsize = AtomicUsize::new(0);
/// Where the next claim starts looking (at or below the lowest free slot, mostly).
static HINT: AtomicUsize = AtomicUsize::new(0);
/// Registrations alive now.
static LIVE_COUNT: AtomicUsize = AtomicUsize::new(0);
/// Most registrations alive at once: [`CAPACITY`], or fewer when `vm.max_map_count` would
/// be reached first (read once).
static BUDGET: OnceLock<usize> = OnceLock::new();
/// Mappings left to the rest of the process (heap arenas, thread stacks, namespaces, the
/// VMAs a recovered fault splits off) when the budget comes from `vm.max_map_count`:
/// hitting that limit makes the next allocation or thread spawn abort the process.
const RESERVED_MAPS: usize = 8192;
/// Faults recovered in the whole process.
static RECOVERED: AtomicU64 = AtomicU64::new(0);
/// The SIGBUS disposition before ours, for faults that are not ours.
static PREVIOUS: OnceLock<Result<libc::sigaction, rustix::io::Errno>> = OnceLock::new();
/// Whether `on_sigbus` is installed (set once, after `PREVIOUS`).
static INSTALLED: OnceLock<Result<(), rustix::io::Errno>> = OnceLock::new();

thread_local! {
    /// Faults recovered on this thread (written by the handler on this thread only).
    static THREAD_FAULTS: Cell<u64> = const { Cell::new(0) };
}

/// Faults recovered on the calling thread so far. Compare a value taken before touching
/// client memory with one taken after: a difference means some access in between hit a
/// page the client had taken away (it read zeros or wrote nowhere).
///
/// One thread-local load; the compiler fence keeps the load from moving across the
/// accesses it brackets (the handler's write is invisible to the optimizer otherwise).
#[inline(always)]
pub fn thread_faults() -> u64 {
    compiler_fence(Ordering::SeqCst);
    let n = THREAD_FAULTS.with(Cell::get);
    compiler_fence(Ordering::SeqCst);
    n
}

/// Faults recovered in the whole process so far (metrics, tests).
pub fn faults_recovered() -> u64 {
    RECOVERED.load(Ordering::Relaxed)
}

/// A registered mapping; unregisters on drop. Must be dropped before the mapping is
/// unmapped (see `MmapRegion`'s Drop).
#[derive(Debug)]
pub(crate) struct Registration {
    slot: usize,
}

/// Register `[start, start + len)`, mapped with pages of `page` bytes (a power of two;
/// `start` and `len` multiples of it), so a SIGBUS inside it is recovered. Installs the
/// handler on first use. ENOMEM when the budget of shared mappings is used up (every slot
/// taken, or the process close to `vm.max_map_count`).
pub(crate) fn register(start: usize, len: usize, page: usize) -> Result<Registration, MemError> {
    install()?;
    let budget = *BUDGET.get_or_init(|| {
        std::fs::read_to_string("/proc/sys/vm/max_map_count")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .map_or(CAPACITY, |max| {
                max.saturating_sub(RESERVED_MAPS).min(CAPACITY)
            })
    });
    if LIVE_COUNT.fetch_add(1, Ordering::Relaxed) >= budget {
        LIVE_COUNT.fetch_sub(1, Ordering::Relaxed);
        return Err(os("mmap", rustix::io::Errno::NOMEM));
    }
    let claimed = claim(start, len, page);
    if claimed.is_err() {
        LIVE_COUNT.fetch_sub(1, Ordering::Relaxed);
    }
    claimed
}

/// Take a free slot for `[start, start + len)`.
fn claim(start: usize, len: usize, page: usize) -> Result<Registration, MemError> {
    let hint = HINT.load(Ordering::Relaxed);
    for i in 0..CAPACITY {
        let idx = (hint + i) % CAPACITY;
        let Some(slot) = SLOTS.get(idx) else { break };
        let s = slot.state.load(Ordering::Relaxed);
        if s & STATE_MASK != FREE {
            continue;
        }
        let busy = (s & !STATE_MASK) + GENERATION + BUSY;
        if slot
            .state
            .compare_exchange(s, busy, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            continue;
        }
        // Seqlock writer: the BUSY state is ordered before the field stores, so a handler
        // that re-checks the state after reading the fields sees a change if it raced them.
        fence(Ordering::Release);
        slot.start.store(start, Ordering::Relaxed);
        slot.len.store(len, Ordering::Relaxed);
        slot.page.store(page, Ordering::Relaxed);
        slot.lost.store(false, Ordering::Relaxed);
        HIGH.fetch_max(idx + 1, Ordering::Relaxed);
        HINT.store(idx + 1, Ordering::Relaxed);
        // Release: a handler that sees LIVE (Acquire) sees the fields above.
        slot.state.store(busy - BUSY + LIVE, Ordering::Release);
        return Ok(Registration { slot: idx });
    }
    Err(os("mmap", rustix::io::Errno::NOMEM))
}

impl Registration {
    /// Whether a fault in the mapping was recovered (it reads zeros and drops writes now).
    /// One Relaxed load: the thread that faulted also sees its own fault count change, and
    /// any other thread only needs to see the flag eventually.
    #[inline(always)]
    pub(crate) fn is_lost(&self) -> bool {
        SLOTS
            .get(self.slot)
            .is_some_and(|s| s.lost.load(Ordering::Relaxed))
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(slot) = SLOTS.get(self.slot) {
            let s = slot.state.load(Ordering::Relaxed);
            // A new generation, marked free: a handler that read the fields under the old
            // one sees the state change on its re-check.
            slot.state
                .store((s & !STATE_MASK) + GENERATION + FREE, Ordering::Release);
            // Reuse low slots first, so the range the handler scans stays short.
            HINT.fetch_min(self.slot, Ordering::Relaxed);
            LIVE_COUNT.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// The registered mapping holding `addr`: its slot, start and length.
fn lookup(addr: usize) -> Option<(&'static Slot, usize, usize)> {
    let high = HIGH.load(Ordering::Acquire).min(CAPACITY);
    for slot in SLOTS.get(..high)? {
        let s = slot.state.load(Ordering::Acquire);
        if s & STATE_MASK != LIVE {
            continue;
        }
        let (start, len, page) = (
            slot.start.load(Ordering::Relaxed),
            slot.len.load(Ordering::Relaxed),
            slot.page.load(Ordering::Relaxed),
        );
        // The fields were read under generation `s` only if the state is unchanged.
        fence(Ordering::Acquire);
        if slot.state.load(Ordering::Relaxed) != s {
            continue;
        }
        let off = addr.wrapping_sub(start);
        if addr >= start && off < len && page.is_power_of_two() {
            return Some((slot, start, len));
        }
    }
    None
}

/// Install the SIGBUS handler once per process; later calls return the first result.
/// The previous disposition is read and stored in `PREVIOUS` first, and only then is the
/// handler installed, so the handler never runs while `PREVIOUS` is still empty.
fn install() -> Result<(), MemError> {
    let prev = PREVIOUS.get_or_init(|| {
        // SAFETY: an all-zero `sigaction` is a valid value (SIG_DFL, empty mask, no flags).
        let mut old: libc::sigaction = unsafe { std::mem::zeroed() };
        // SAFETY: a null new action only reads the current one into `old`, a valid, live
        // sigaction struct; SIGBUS is a valid signal number.
        let rc = unsafe { libc::sigaction(libc::SIGBUS, ptr::null(), &mut old) };
        if rc == 0 { Ok(old) } else { Err(last_errno()) }
    });
    if let Err(e) = prev {
        return Err(os("sigaction", *e));
    }
    let installed = INSTALLED.get_or_init(|| {
        // SAFETY: as above, an all-zero `sigaction` is a valid value.
        let mut new: libc::sigaction = unsafe { std::mem::zeroed() };
        new.sa_sigaction = on_sigbus as *const () as usize;
        new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_NODEFER;
        // SAFETY: `new` is a valid, live sigaction struct and a null old-action pointer is
        // allowed; the handler is an `extern "C"` function with the SA_SIGINFO signature
        // that stays valid for the life of the process; SIGBUS is a catchable signal.
        let rc = unsafe { libc::sigaction(libc::SIGBUS, &new, ptr::null_mut()) };
        if rc == 0 { Ok(()) } else { Err(last_errno()) }
    });
    match installed {
        Ok(()) => Ok(()),
        Err(e) => Err(os("sigaction", *e)),
    }
}

fn last_errno() -> rustix::io::Errno {
    rustix::io::Errno::from_io_error(&std::io::Error::last_os_error())
        .unwrap_or(rustix::io::Errno::INVAL)
}

/// The SIGBUS handler (SA_SIGINFO). See the module docs.
extern "C" fn on_sigbus(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    // SAFETY: with SA_SIGINFO the kernel passes a valid siginfo_t for this signal; for
    // SIGBUS its address field is the faulting address.
    let (addr, code) = unsafe { ((*info).si_addr().addr(), (*info).si_code) };
    if code == libc::BUS_ADRERR && recover(addr) {
        return;
    }
    chain(sig, info, ctx);
}

/// Replace the whole registered mapping holding `addr` with zero memory and mark it lost;
/// false if `addr` is not in one or the replacement failed.
fn recover(addr: usize) -> bool {
    let Some((slot, start, len)) = lookup(addr) else {
        return false;
    };
    // SAFETY: `[start, start + len)` is exactly a live mapping registered by
    // `MmapRegion::map_shared` (the registration is dropped before the mapping is unmapped,
    // and the faulting thread is inside an access to it), aligned to its own page size, so
    // MAP_FIXED replaces only memory this crate owns and that no Rust reference points into
    // (all access is by raw copies); the region's Drop unmaps the same range. The new
    // memory is private, anonymous and zero-filled, and one VMA replaces one VMA, so the
    // process's map count does not grow.
    let mapped = unsafe {
        mm::mmap_anonymous(
            ptr::without_provenance_mut(start),
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::PRIVATE | MapFlags::FIXED | MapFlags::NORESERVE,
        )
    };
    if mapped.is_err() {
        return false;
    }
    slot.lost.store(true, Ordering::Relaxed);
    RECOVERED.fetch_add(1, Ordering::Relaxed);
    THREAD_FAULTS.with(|n| n.set(n.get().wrapping_add(1)));
    true
}

/// Hand a fault that is not ours to the disposition that was there before.
fn chain(sig: c_int, info: *mut libc::siginfo_t, ctx: *mut c_void) {
    let prev = match PREVIOUS.get() {
        Some(Ok(p)) => *p,
        // Unreachable (`install` sets PREVIOUS before it installs the handler); fall back
        // to the default action.
        // SAFETY: an all-zero sigaction is SIG_DFL.
        _ => unsafe { std::mem::zeroed() },
    };
    let handler = prev.sa_sigaction;
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        // Restore the default and return: the access faults again and the kernel applies
        // it (SIGBUS cannot be ignored for a fault), with the usual core dump.
        // SAFETY: an all-zero sigaction is SIG_DFL with an empty mask; sigaction is
        // async-signal-safe.
        let mut dfl: libc::sigaction = unsafe { std::mem::zeroed() };
        dfl.sa_sigaction = libc::SIG_DFL;
        // SAFETY: `dfl` is a valid sigaction; a null old-action pointer is allowed.
        unsafe { libc::sigaction(libc::SIGBUS, &dfl, ptr::null_mut()) };
    } else if prev.sa_flags & libc::SA_SIGINFO != 0 {
        // SAFETY: the previous handler was installed with SA_SIGINFO, so it has this
        // signature; it is called with the arguments the kernel gave us.
        let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut c_void) =
            unsafe { std::mem::transmute(handler) };
        f(sig, info, ctx);
    } else {
        // SAFETY: the previous handler was installed without SA_SIGINFO, so it takes the
        // signal number only.
        let f: extern "C" fn(c_int) = unsafe { std::mem::transmute(handler) };
        f(sig);
    }
}

#[cfg(test)]
mod tests {
    use std::os::fd::AsFd;

    use rustix::fs::{self, MemfdFlags};

    use crate::{MmapRegion, Protection};

    use super::*;

    fn unsealed(size: u64) -> std::os::fd::OwnedFd {
        let fd = fs::memfd_create("fault-test", MemfdFlags::CLOEXEC).unwrap();
        fs::ftruncate(&fd, size).unwrap();
        fd
    }

    #[test]
    fn a_shrunk_memfd_reads_zero_counts_one_fault_and_is_lost() {
        let fd = unsealed(4 * 4096);
        let m = MmapRegion::map_shared(fd.as_fd(), 0, 4 * 4096, Protection::ReadWrite).unwrap();
        m.fill(0, 4 * 4096, 0xAB).unwrap();
        fs::ftruncate(&fd, 4096).unwrap();
        let before = thread_faults();
        let total = faults_recovered();
        // Page 0 is still backed: no fault.
        assert_eq!(m.read_obj::<u8>(0).unwrap(), 0xAB);
        assert_eq!(thread_faults(), before);
        assert!(!m.is_lost());
        // Page 2 is gone: the read completes with zeros and is counted.
        let mut buf = [0xFFu8; 64];
        m.copy_to(2 * 4096 + 8, &mut buf).unwrap();
        assert_eq!(buf, [0u8; 64]);
        assert_eq!(thread_faults(), before + 1);
        assert!(faults_recovered() > total);
        // The whole mapping was replaced at once: it is lost, every page reads zero (the
        // backed one too), and writes anywhere complete without another fault.
        assert!(m.is_lost());
        assert_eq!(m.read_obj::<u8>(0).unwrap(), 0);
        m.copy_from(3 * 4096, &[1, 2, 3]).unwrap();
        m.copy_from(2 * 4096, &[7]).unwrap();
        assert_eq!(m.read_obj::<u8>(2 * 4096).unwrap(), 7);
        assert_eq!(thread_faults(), before + 1);
    }

    /// Lines of /proc/self/maps: one per VMA.
    fn map_count() -> usize {
        std::fs::read_to_string("/proc/self/maps")
            .unwrap()
            .lines()
            .count()
    }

    #[test]
    fn faults_on_every_other_page_do_not_split_the_mapping() {
        const PAGES: u64 = 4096;
        let fd = unsealed(PAGES * 4096);
        let m = MmapRegion::map_shared(fd.as_fd(), 0, PAGES * 4096, Protection::ReadWrite).unwrap();
        fs::ftruncate(&fd, 0).unwrap();
        let before = map_count();
        let faults = thread_faults();
        for page in (0..PAGES).step_by(2) {
            m.copy_from(page * 4096, &[1]).unwrap();
        }
        assert_eq!(
            thread_faults(),
            faults + 1,
            "one recovery for the whole mapping"
        );
        // Other tests map and unmap meanwhile; page by page this would add 2048+ VMAs.
        let after = map_count();
        assert!(after < before + 64, "maps {before} -> {after}");
    }

    #[test]
    fn a_truncated_regular_file_is_survived_too() {
        let mut f = tempfile::tempfile().unwrap();
        std::io::Write::write_all(&mut f, &[0x5Au8; 8192]).unwrap();
        let m = MmapRegion::map_shared(f.as_fd(), 0, 8192, Protection::Read).unwrap();
        f.set_len(0).unwrap();
        let before = thread_faults();
        assert_eq!(m.read_obj::<u64>(4096).unwrap(), 0);
        assert_eq!(thread_faults(), before + 1);
    }

    #[test]
    fn faults_on_other_threads_are_not_counted_here() {
        let fd = unsealed(8192);
        let m = MmapRegion::map_shared(fd.as_fd(), 0, 8192, Protection::ReadWrite).unwrap();
        fs::ftruncate(&fd, 0).unwrap();
        let before = thread_faults();
        let theirs = std::thread::scope(|s| {
            s.spawn(|| {
                let t0 = thread_faults();
                m.read_obj::<u32>(0).unwrap();
                thread_faults() - t0
            })
            .join()
            .unwrap()
        });
        assert_eq!(theirs, 1);
        assert_eq!(thread_faults(), before);
    }

    #[test]
    fn slots_are_reused_after_unmap() {
        let fd = unsealed(4096);
        for _ in 0..(CAPACITY + 10) / 64 {
            let maps: Vec<_> = (0..64)
                .map(|_| MmapRegion::map_shared(fd.as_fd(), 0, 4096, Protection::Read).unwrap())
                .collect();
            drop(maps);
        }
        assert!(HIGH.load(Ordering::Relaxed) < CAPACITY);
    }

    #[test]
    fn lookup_finds_only_registered_ranges() {
        let fd = unsealed(3 * 4096);
        let m = MmapRegion::map_shared(fd.as_fd(), 4096, 4096, Protection::Read).unwrap();
        let start = m.base_addr();
        // (Addresses outside it may belong to mappings other tests register meanwhile.)
        let span = |a| lookup(a).map(|(_, s, l)| (s, l));
        assert_eq!(span(start), Some((start, 4096)));
        assert_eq!(span(start + 4095), Some((start, 4096)));
        let stack = 0u8;
        assert_eq!(span(std::ptr::addr_of!(stack).addr()), None);
    }
}
