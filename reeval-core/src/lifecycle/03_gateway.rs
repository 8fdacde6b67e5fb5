//! The gateway phase: the egress gateway, the sandbox's only way out.
//!
//! Not built yet: sandboxes have no network at all (`NetworkSpec::None`), so
//! this phase does not run and is not recorded.

use crate::sandbox::NetworkSpec;

/// The network the sandbox gets.
pub(crate) fn network() -> NetworkSpec {
    NetworkSpec::None
}
