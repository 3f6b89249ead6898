//! What may be asked of a layer, and what each operation answers: one set of operations for a
//! session's `{"layer": …}` requests, the MCP tools and `cordon layer` from another terminal,
//! so that a running cordon does for another terminal what its session would
//! ([`super::apply`]).
//!
//! Serialized, an operation is the session's request (`{"layer": "rollback", "label": "2"}`)
//! and its answer the session's answer (`{"rolled_back": "2"}`).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::{Change, LayerError, stack};

/// An operation on a layer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "layer", rename_all = "snake_case")]
pub enum Op {
    /// Its changes as a unified diff, or a summary per file (`stat`).
    Diff {
        #[serde(default)]
        stat: bool,
    },
    /// Freezes its state under `label` (the next free number when none).
    Checkpoint { label: Option<String> },
    /// Lists its checkpoints, the oldest first.
    Checkpoints,
    /// Brings it back to the checkpoint `label`.
    Rollback { label: String },
    /// Makes the layer `name` (a name, or a path with a '/') from its current state.
    Fork { name: String },
    /// Copies its changes into the workspace ([`super::accept`]).
    Accept(Accept),
    /// Removes it ([`super::discard`]). A cordon running in it drops every change and
    /// checkpoint at once, goes on over the workspace as it is, and removes it when it ends.
    Discard,
}

/// What an accept takes: the changes at or below `paths` (all when none; relative to the
/// workspace, or in it). A change to a protected path refuses the whole accept unless
/// `unprotect` relaxes its rule or it is `allowed` (by its path in the layer: the user said
/// yes to that change).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Accept {
    #[serde(default, with = "path::many")]
    pub paths: Vec<PathBuf>,
    #[serde(default, with = "path::many")]
    pub unprotect: Vec<PathBuf>,
    #[serde(default, with = "path::many")]
    pub allowed: Vec<PathBuf>,
}

/// What an operation did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Done {
    Diff(String),
    Checkpoint(String),
    Checkpoints(Vec<String>),
    RolledBack(String),
    Fork(String),
    Accepted(Vec<Change>),
    /// `pending`: a cordon runs in it, and removes it when it ends.
    Discarded {
        pending: bool,
    },
}

impl Op {
    /// Whether it only reads the layer: it may run beside the calls of a cordon using it.
    pub(super) fn reads(&self) -> bool {
        matches!(self, Op::Diff { .. } | Op::Checkpoints)
    }
}

/// The labels of the checkpoints of the layer at `dir`, the oldest first.
pub(super) fn labels(dir: &Path) -> Result<Done, LayerError> {
    let all = stack::checkpoints(dir)?;
    Ok(Done::Checkpoints(
        all.into_iter().map(|c| c.label).collect(),
    ))
}

/// A path as an operation or its answer carries it (`#[serde(with = "path")]`): a string, or
/// for one that is not UTF-8 the array of its bytes. serde's own form, a string, fails on such
/// a path, which a layer may hold.
pub(super) mod path {
    use std::ffi::OsString;
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    use std::path::{Path, PathBuf};

    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    #[serde(untagged)]
    enum Form {
        Text(String),
        Bytes(Vec<u8>),
    }

    fn form(path: &Path) -> Form {
        match path.to_str() {
            Some(text) => Form::Text(text.to_string()),
            None => Form::Bytes(path.as_os_str().as_bytes().to_vec()),
        }
    }

    fn path(form: Form) -> PathBuf {
        match form {
            Form::Text(text) => PathBuf::from(text),
            Form::Bytes(bytes) => PathBuf::from(OsString::from_vec(bytes)),
        }
    }

    pub fn serialize<S: Serializer>(value: &Path, serializer: S) -> Result<S::Ok, S::Error> {
        form(value).serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<PathBuf, D::Error> {
        Form::deserialize(deserializer).map(path)
    }

    /// A list of paths, each as above.
    pub mod many {
        use super::*;

        pub fn serialize<S: Serializer>(
            value: &[PathBuf],
            serializer: S,
        ) -> Result<S::Ok, S::Error> {
            let forms: Vec<Form> = value.iter().map(|p| form(p)).collect();
            forms.serialize(serializer)
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(
            deserializer: D,
        ) -> Result<Vec<PathBuf>, D::Error> {
            Vec::<Form>::deserialize(deserializer)
                .map(|forms| forms.into_iter().map(path).collect())
        }
    }
}
