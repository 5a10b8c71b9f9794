// SPDX-License-Identifier: Apache-2.0
//! Values Identify Controller advertises that other commands then honour: the Error
//! Information log's depth (ELPE, Get Log Page) and the temperature thresholds (WCTEMP and
//! CCTEMP, the Temperature Threshold feature's default).

/// Entries kept in the Error Information log (ELPE + 1).
pub(crate) const ERROR_LOG_ENTRIES: usize = 64;
/// Warning Composite Temperature Threshold: 343 K (70 C).
pub(crate) const WCTEMP: u16 = 343;
/// Critical Composite Temperature Threshold: 373 K (100 C).
pub(crate) const CCTEMP: u16 = 373;
