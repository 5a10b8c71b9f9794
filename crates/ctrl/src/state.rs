// SPDX-License-Identifier: Apache-2.0
//! The controller's enable/shutdown state machine (NVMe Base 1.4, 7.6 "Controller
//! Initialization" and 7.6.2 "Shutdown"), with every transition in `transition`.
//!
//! CSTS is derived from the state, never stored beside it.

use nvmemu_spec::regs::csts;

/// Where the controller is in its life cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CtrlState {
    /// CC.EN = 0: no queues, registers writable.
    Disabled,
    /// CC.EN = 1 and CSTS.RDY = 1: queues are processed.
    Ready,
    /// A shutdown notification completed (CSTS.SHST = complete); nothing is processed until
    /// the host disables the controller. `enabled`: CC.EN was 1 (so CSTS.RDY stays 1).
    ShutDown {
        /// CC.EN was 1 when the shutdown happened.
        enabled: bool,
    },
    /// Controller Fatal Status: enable was refused or queue memory vanished. Left only by
    /// CC.EN 1 -> 0 or a reset. `ready`: CSTS.RDY was 1.
    Fatal {
        /// CSTS.RDY was 1.
        ready: bool,
    },
}

/// What the host (or the environment) did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CtrlEvent {
    /// CC.EN 0 -> 1 with valid AQA/ASQ/ACQ/MPS/CSS/AMS and mapped admin rings.
    Enable,
    /// CC.EN 0 -> 1 with something the controller cannot accept.
    EnableRejected,
    /// CC.EN 1 -> 0.
    Disable,
    /// CC.SHN 00b -> normal or abrupt.
    Shutdown,
    /// Queue memory disappeared or another unrecoverable condition.
    Fault,
}

/// What the controller must do for a transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Nothing beyond the state change.
    None,
    /// Create the admin queues from AQA/ASQ/ACQ.
    CreateAdminQueues,
    /// Delete every queue, drop AERs and shadow doorbells, reset features.
    TearDown,
}

/// The single transition function.
pub(crate) fn transition(state: CtrlState, event: CtrlEvent) -> (CtrlState, Action) {
    use CtrlEvent as E;
    use CtrlState as S;
    match (state, event) {
        (S::Disabled | S::ShutDown { enabled: false }, E::Enable) => {
            (S::Ready, Action::CreateAdminQueues)
        }
        (S::Disabled | S::ShutDown { enabled: false }, E::EnableRejected) => {
            (S::Fatal { ready: false }, Action::None)
        }
        (S::Disabled, E::Disable) => (S::Disabled, Action::None),
        (S::Disabled, E::Shutdown) => (S::ShutDown { enabled: false }, Action::None),
        (S::Disabled, E::Fault) => (S::Fatal { ready: false }, Action::None),
        // EN is already 1: there is no 0 -> 1 edge.
        (S::Ready, E::Enable | E::EnableRejected) => (S::Ready, Action::None),
        (S::Ready, E::Disable) => (S::Disabled, Action::TearDown),
        (S::Ready, E::Shutdown) => (S::ShutDown { enabled: true }, Action::TearDown),
        (S::Ready, E::Fault) => (S::Fatal { ready: true }, Action::None),
        (S::ShutDown { enabled: true }, E::Enable | E::EnableRejected) => (state, Action::None),
        (S::ShutDown { .. }, E::Disable) => (S::Disabled, Action::TearDown),
        (S::ShutDown { .. }, E::Shutdown) => (state, Action::None),
        (S::ShutDown { enabled }, E::Fault) => (S::Fatal { ready: enabled }, Action::None),
        (S::Fatal { .. }, E::Disable) => (S::Disabled, Action::TearDown),
        (S::Fatal { .. }, E::Enable | E::EnableRejected | E::Shutdown | E::Fault) => {
            (state, Action::None)
        }
    }
}

impl CtrlState {
    /// CSTS for this state.
    pub fn csts(self) -> u32 {
        match self {
            CtrlState::Disabled => 0,
            CtrlState::Ready => csts::RDY,
            CtrlState::ShutDown { enabled } => {
                csts::SHST_COMPLETE | if enabled { csts::RDY } else { 0 }
            }
            CtrlState::Fatal { ready } => csts::CFS | if ready { csts::RDY } else { 0 },
        }
    }

    /// Whether queues are processed.
    pub fn is_ready(self) -> bool {
        self == CtrlState::Ready
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use CtrlEvent as E;
    use CtrlState as S;

    #[test]
    fn transition_table() {
        let sd_on = S::ShutDown { enabled: true };
        let sd_off = S::ShutDown { enabled: false };
        let f_on = S::Fatal { ready: true };
        let f_off = S::Fatal { ready: false };
        #[rustfmt::skip]
        let table = [
            (S::Disabled, E::Enable, S::Ready, Action::CreateAdminQueues),
            (S::Disabled, E::EnableRejected, f_off, Action::None),
            (S::Disabled, E::Disable, S::Disabled, Action::None),
            (S::Disabled, E::Shutdown, sd_off, Action::None),
            (S::Disabled, E::Fault, f_off, Action::None),
            (S::Ready, E::Enable, S::Ready, Action::None),
            (S::Ready, E::EnableRejected, S::Ready, Action::None),
            (S::Ready, E::Disable, S::Disabled, Action::TearDown),
            (S::Ready, E::Shutdown, sd_on, Action::TearDown),
            (S::Ready, E::Fault, f_on, Action::None),
            (sd_on, E::Enable, sd_on, Action::None),
            (sd_on, E::Disable, S::Disabled, Action::TearDown),
            (sd_on, E::Shutdown, sd_on, Action::None),
            (sd_on, E::Fault, f_on, Action::None),
            (sd_off, E::Enable, S::Ready, Action::CreateAdminQueues),
            (sd_off, E::EnableRejected, f_off, Action::None),
            (sd_off, E::Disable, S::Disabled, Action::TearDown),
            (sd_off, E::Fault, f_off, Action::None),
            (f_on, E::Disable, S::Disabled, Action::TearDown),
            (f_on, E::Enable, f_on, Action::None),
            (f_on, E::Shutdown, f_on, Action::None),
            (f_off, E::Disable, S::Disabled, Action::TearDown),
            (f_off, E::Fault, f_off, Action::None),
        ];
        for (from, event, to, action) in table {
            assert_eq!(
                transition(from, event),
                (to, action),
                "{from:?} + {event:?}"
            );
        }
    }

    #[test]
    fn csts_follows_state() {
        assert_eq!(S::Disabled.csts(), 0);
        assert_eq!(S::Ready.csts(), csts::RDY);
        assert_eq!(
            S::ShutDown { enabled: true }.csts(),
            csts::RDY | csts::SHST_COMPLETE
        );
        assert_eq!(S::Fatal { ready: false }.csts(), csts::CFS);
    }
}
