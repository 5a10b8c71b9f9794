// SPDX-License-Identifier: Apache-2.0
//! The running target: pollers on the cores of the mask, and one controller per socket
//! directory, each served by its own control thread.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use nvmemu_bdev::Bdev;
use nvmemu_ctrl::{Controller, ControllerConfig, ControllerStats, Namespace};
use nvmemu_spec::Nsid;
use nvmemu_vfio_user::{Deadlines, Listener, StopHandle};

use crate::budget::ClientBudget;
use crate::function::{NvmeFunction, create_doorbells};
use crate::irq::MsixSink;
use crate::poller::{Backoff, PolledController, Poller, PollerStatsSnapshot};
use crate::{Admission, ControllerId};

/// How to start a target.
#[derive(Debug, Clone)]
pub struct TargetConfig {
    /// Cores for pollers, one poller per core (from `-m`).
    pub cores: Vec<usize>,
    /// Pin pollers to their cores.
    pub pin: bool,
    /// Idle back-off of the pollers.
    pub backoff: Backoff,
    /// How long control threads wait for their clients (VERSION, each message, each reply).
    pub deadlines: Deadlines,
    /// How long a control thread waits for its poller ([`crate::mailbox::CALL_TIMEOUT`]);
    /// a call not answered in time drops that controller's client, and the controller
    /// serves again once its poller answers.
    pub poller_timeout: std::time::Duration,
    /// What each client may map (fd-backed DMA regions and their bytes).
    pub client_budget: ClientBudget,
}

/// One controller to serve.
#[derive(Debug)]
pub struct ControllerSpec {
    /// Directory that gets the `cntrl` socket (SPDK's layout).
    pub socket_dir: PathBuf,
    /// Socket file mode.
    pub socket_mode: u32,
    /// Identity and limits.
    pub config: ControllerConfig,
    /// Namespaces attached at start.
    pub namespaces: Vec<Namespace>,
    /// Whether clients are admitted ([`Admission::default`]: always).
    pub admission: Admission,
}

/// Errors of starting a target or adding a controller.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    /// A poller thread could not start.
    #[error("cannot start poller thread")]
    Spawn(#[source] std::io::Error),
    /// The socket could not be created.
    #[error("cannot listen on {path}")]
    Listen {
        /// Socket directory.
        path: PathBuf,
        /// Cause.
        #[source]
        source: std::io::Error,
    },
    /// The doorbell memory could not be created.
    #[error("cannot create the doorbell page")]
    Doorbells(#[source] nvmemu_mem::MemError),
    /// The target has no poller.
    #[error("no cores to run pollers on")]
    NoCores,
    /// A poller did not answer.
    #[error("poller did not answer")]
    Poller,
    /// No controller with that id.
    #[error("no controller {0:?}")]
    NoController(ControllerId),
    /// The controller refused a namespace change.
    #[error("namespace change refused: {0}")]
    Namespace(String),
}

#[derive(Debug)]
struct ControllerEntry {
    id: ControllerId,
    poller: usize,
    socket_dir: PathBuf,
    stop: StopHandle,
    thread: Option<JoinHandle<()>>,
}

/// A running target.
#[derive(Debug)]
pub struct Target {
    pollers: Vec<Poller>,
    controllers: Mutex<Vec<ControllerEntry>>,
    next_id: Mutex<u32>,
    deadlines: Deadlines,
    poller_timeout: std::time::Duration,
    client_budget: ClientBudget,
}

impl Target {
    /// Start one poller per core.
    pub fn start(config: TargetConfig) -> Result<Target, TargetError> {
        if config.cores.is_empty() {
            return Err(TargetError::NoCores);
        }
        let pollers = config
            .cores
            .iter()
            .enumerate()
            .map(|(i, &cpu)| Poller::spawn(i, config.pin.then_some(cpu), config.backoff))
            .collect::<Result<Vec<_>, _>>()
            .map_err(TargetError::Spawn)?;
        Ok(Target {
            pollers,
            controllers: Mutex::new(Vec::new()),
            next_id: Mutex::new(0),
            deadlines: config.deadlines,
            poller_timeout: config.poller_timeout,
            client_budget: config.client_budget,
        })
    }

    /// Create a controller, put it on the least loaded poller and start serving its socket.
    pub fn add_controller(&self, spec: ControllerSpec) -> Result<ControllerId, TargetError> {
        let id = {
            let mut next = self.next_id.lock().unwrap_or_else(|e| e.into_inner());
            *next += 1;
            ControllerId(*next)
        };
        let mut entries = self.controllers.lock().unwrap_or_else(|e| e.into_inner());
        let poller = (0..self.pollers.len())
            .min_by_key(|p| entries.iter().filter(|e| e.poller == *p).count())
            .ok_or(TargetError::NoCores)?;
        let listener = Listener::bind(&spec.socket_dir, spec.socket_mode).map_err(|source| {
            TargetError::Listen {
                path: spec.socket_dir.clone(),
                source,
            }
        })?;
        let (doorbell_fd, doorbells) = create_doorbells().map_err(TargetError::Doorbells)?;
        let msix_vectors = spec.config.msix_vectors;
        let mut ctrl = Controller::new(spec.config, doorbells.clone());
        for ns in spec.namespaces {
            ctrl.attach_namespace(ns)
                .map_err(|e| TargetError::Namespace(e.to_string()))?;
        }
        let mailbox = self.pollers[poller].mailbox.clone();
        mailbox
            .call(move |st| {
                st.controllers.push(PolledController {
                    id,
                    ctrl,
                    irq: MsixSink::default(),
                })
            })
            .map_err(|_| TargetError::Poller)?;
        let stop = StopHandle::new().map_err(TargetError::Spawn)?;
        let thread = {
            let stop = stop.clone();
            let deadlines = self.deadlines;
            let mut function = NvmeFunction::new(
                id,
                mailbox,
                doorbell_fd,
                doorbells,
                msix_vectors,
                self.poller_timeout,
            )
            .with_budget(self.client_budget)
            .with_admission(spec.admission);
            std::thread::Builder::new()
                .name(format!("nvmemu-ctrl{}", id.0))
                .spawn(move || {
                    nvmemu_vfio_user::serve_clients(&listener, &mut function, &stop, &deadlines)
                })
                .map_err(TargetError::Spawn)?
        };
        tracing::info!(
            "controller {id:?} listening on {}/cntrl (poller {poller})",
            spec.socket_dir.display()
        );
        entries.push(ControllerEntry {
            id,
            poller,
            socket_dir: spec.socket_dir,
            stop,
            thread: Some(thread),
        });
        Ok(id)
    }

    /// Stop serving a controller and remove its socket.
    pub fn remove_controller(&self, id: ControllerId) -> Result<(), TargetError> {
        let mut entry = {
            let mut entries = self.controllers.lock().unwrap_or_else(|e| e.into_inner());
            let pos = entries
                .iter()
                .position(|e| e.id == id)
                .ok_or(TargetError::NoController(id))?;
            entries.remove(pos)
        };
        stop_entry(&mut entry);
        self.pollers[entry.poller]
            .mailbox
            .call(move |st| st.controllers.retain(|c| c.id != id))
            .map_err(|_| TargetError::Poller)
    }

    /// Attach a namespace to a running controller (the host is told by an async event).
    pub fn attach_namespace(&self, id: ControllerId, ns: Namespace) -> Result<(), TargetError> {
        self.on_controller(id, move |c| {
            c.ctrl.attach_namespace(ns).map_err(|e| e.to_string())
        })?
        .map_err(TargetError::Namespace)
    }

    /// Detach a namespace from a running controller; returns its block device.
    pub fn detach_namespace(&self, id: ControllerId, nsid: Nsid) -> Result<Arc<Bdev>, TargetError> {
        self.on_controller(id, move |c| {
            c.ctrl.detach_namespace(nsid).map_err(|e| e.to_string())
        })?
        .map_err(TargetError::Namespace)
    }

    /// Run `f` on the poller that owns controller `id`.
    pub fn on_controller<R: Send + 'static>(
        &self,
        id: ControllerId,
        f: impl FnOnce(&mut PolledController) -> R + Send + 'static,
    ) -> Result<R, TargetError> {
        let poller = {
            let entries = self.controllers.lock().unwrap_or_else(|e| e.into_inner());
            entries
                .iter()
                .find(|e| e.id == id)
                .map(|e| e.poller)
                .ok_or(TargetError::NoController(id))?
        };
        self.pollers[poller]
            .mailbox
            .call(move |st| st.get_mut(id).map(f))
            .map_err(|_| TargetError::Poller)?
            .ok_or(TargetError::NoController(id))
    }

    /// The socket directory of each controller.
    pub fn controllers(&self) -> Vec<(ControllerId, PathBuf)> {
        let entries = self.controllers.lock().unwrap_or_else(|e| e.into_inner());
        entries
            .iter()
            .map(|e| (e.id, e.socket_dir.clone()))
            .collect()
    }

    /// Each controller with the index of the poller that owns it.
    pub fn controller_pollers(&self) -> Vec<(ControllerId, usize)> {
        let entries = self.controllers.lock().unwrap_or_else(|e| e.into_inner());
        entries.iter().map(|e| (e.id, e.poller)).collect()
    }

    /// Every controller's counters, with the index of the poller that owns it (the order of
    /// [`Target::poller_stats`]). One mailbox call per controller; a controller removed
    /// meanwhile is left out.
    pub fn controller_stats(&self) -> Vec<(usize, ControllerStats)> {
        self.controller_pollers()
            .into_iter()
            .filter_map(|(id, poller)| {
                let stats = self.on_controller(id, |c| c.ctrl.stats()).ok()?;
                Some((poller, stats))
            })
            .collect()
    }

    /// Counters of every poller, with the CPU it runs on.
    pub fn poller_stats(&self) -> Vec<(Option<usize>, PollerStatsSnapshot)> {
        self.pollers.iter().map(|p| (p.cpu, p.stats())).collect()
    }

    /// Each poller's kernel thread id, in poller order.
    pub fn poller_tids(&self) -> Vec<Option<u32>> {
        self.pollers.iter().map(Poller::tid).collect()
    }

    /// Stop every controller (sockets removed) and every poller.
    pub fn shutdown(mut self) {
        self.stop_all();
    }

    fn stop_all(&mut self) {
        let entries =
            std::mem::take(&mut *self.controllers.lock().unwrap_or_else(|e| e.into_inner()));
        for mut entry in entries {
            stop_entry(&mut entry);
        }
        for p in &mut self.pollers {
            p.stop();
        }
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        self.stop_all();
    }
}

fn stop_entry(entry: &mut ControllerEntry) {
    entry.stop.stop();
    if let Some(t) = entry.thread.take() {
        let _ = t.join();
    }
}

/// Convenience for callers that only have a path.
pub fn socket_path(dir: &Path) -> PathBuf {
    dir.join(nvmemu_vfio_user::SOCKET_NAME)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    use nvmemu_vfio_user::{Client, ClientError, Errno};

    fn spec(dir: &Path) -> ControllerSpec {
        let bdev = Bdev::null("n", 512, 1 << 10).expect("bdev");
        ControllerSpec {
            socket_dir: dir.to_path_buf(),
            socket_mode: 0o600,
            config: ControllerConfig::default(),
            namespaces: vec![Namespace::new(Nsid(1), Arc::new(bdev))],
            admission: Admission::default(),
        }
    }

    /// The inode of the doorbell file BAR0's REGION_INFO hands `c`.
    fn doorbell_inode(c: &mut Client) -> u64 {
        let (_, fd) = c.region_info(crate::regions::BAR0).expect("region info");
        rustix::fs::fstat(fd.expect("BAR0 comes with its fd"))
            .expect("fstat")
            .st_ino
    }

    /// CSTS, read through the controller's poller.
    fn csts(c: &mut Client) -> Result<u32, ClientError> {
        let mut b = [0u8; 4];
        c.region_read(crate::regions::BAR0, 0x1c, &mut b)?;
        Ok(u32::from_le_bytes(b))
    }

    #[test]
    fn a_poller_that_stops_answering_drops_only_its_controllers_client_until_it_answers() {
        let target = Target::start(TargetConfig {
            cores: vec![0, 1],
            pin: false,
            backoff: Backoff::default(),
            deadlines: Deadlines::default(),
            poller_timeout: Duration::from_millis(100),
            client_budget: ClientBudget::default(),
        })
        .expect("target");
        let (da, db) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let a = target
            .add_controller(spec(da.path()))
            .expect("controller A");
        // The least loaded poller: the other one.
        target
            .add_controller(spec(db.path()))
            .expect("controller B");
        let mut ca = Client::connect(&socket_path(da.path())).expect("client A");
        let mut cb = Client::connect(&socket_path(db.path())).expect("client B");
        csts(&mut ca).expect("A answers");
        csts(&mut cb).expect("B answers");
        let first_page = doorbell_inode(&mut ca);
        // Wedge A's poller for a second: a job that sleeps (the zero timeout only posts it).
        let poller = target
            .controllers
            .lock()
            .unwrap()
            .iter()
            .find(|e| e.id == a)
            .map(|e| e.poller)
            .unwrap();
        let _ = target.pollers[poller]
            .mailbox
            .call_with_timeout(Duration::ZERO, |_| {
                std::thread::sleep(Duration::from_secs(1))
            });
        // A's register read times out after 100 ms with ETIMEDOUT, and its client is dropped.
        let t0 = Instant::now();
        match csts(&mut ca) {
            Err(ClientError::Remote { errno, .. }) => assert_eq!(errno, Errno::TIMEDOUT),
            other => panic!("expected ETIMEDOUT, got {other:?}"),
        }
        assert!(t0.elapsed() < Duration::from_millis(900));
        assert!(matches!(
            csts(&mut ca),
            Err(ClientError::Closed | ClientError::Frame(_))
        ));
        // B, on the other poller, answers at once.
        let t0 = Instant::now();
        csts(&mut cb).expect("B still answers");
        // Under A's 1 s wedge: B did not wait for it (generous for a loaded machine).
        assert!(t0.elapsed() < Duration::from_millis(900));
        // While A's poller is still wedged, a new client of A is refused with ENODEV after
        // a short wait (the call timeout).
        let t0 = Instant::now();
        match Client::connect(&socket_path(da.path())) {
            Err(ClientError::Remote { errno, .. }) => assert_eq!(errno, Errno::NODEV),
            other => panic!("expected ENODEV, got {other:?}"),
        }
        assert!(t0.elapsed() < Duration::from_millis(900));
        csts(&mut cb).expect("B still answers");
        // Once the poller answers again, A serves its next client: no operator needed.
        std::thread::sleep(Duration::from_millis(1200));
        let mut ca = Client::connect(&socket_path(da.path())).expect("A serves again");
        assert_eq!(csts(&mut ca).expect("A answers"), 0, "A starts reset");
        // The dropped client may still map its doorbell page: the next one gets another.
        assert_ne!(doorbell_inode(&mut ca), first_page);
    }
}
