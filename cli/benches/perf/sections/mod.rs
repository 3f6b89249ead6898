//! The sections of the bench, one module each, named as on the command line
//! (`-- oneshot session …`); each prints its measurements and adds its rows to the report.

pub(crate) mod breakdown;
pub(crate) mod diff;
pub(crate) mod edit;
pub(crate) mod fork;
pub(crate) mod large;
pub(crate) mod mcp;
pub(crate) mod oneshot;
pub(crate) mod pipe;
pub(crate) mod rss;
pub(crate) mod session;
