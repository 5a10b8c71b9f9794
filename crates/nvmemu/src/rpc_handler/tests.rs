// SPDX-License-Identifier: Apache-2.0
//! Handler tests against a real target (unpinned poller), through `dispatch`.
