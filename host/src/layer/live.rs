//! The layer a running cordon holds: its keeper's mount, and a gate between the calls that
//! use the mount and the operations that take it down and put it up again.
//!
//! Every call holds the gate shared while it runs ([`Live::using`]); an operation that
//! changes the layer holds it alone, so it runs between two calls whoever asks for it: the
//! session, a tool of the layer, or `cordon layer` from another terminal through the layer's
//! control socket ([`super::control`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{RwLock, RwLockReadGuard};

use super::op::{self, Done, Op};
use super::{Keeper, LayerError, control, stack};

/// The layer a cordon runs in; dropping it ends the keeper, and with it the mount (and removes
/// the layer if it was discarded meanwhile).
#[derive(Debug)]
pub struct Live {
    /// Serves other terminals; dropped (and waited for) before the keeper ends.
    _control: control::Server,
    held: Arc<Held>,
}

/// What the session and the control socket share of a live layer.
#[derive(Debug)]
struct Held {
    keeper: Keeper,
    dir: PathBuf,
    workspace: PathBuf,
    /// Shared by the calls running; taken alone by an operation that changes the mount.
    gate: RwLock<()>,
    /// Discarded while in use: removed once the keeper has ended.
    discarded: AtomicBool,
}

impl Live {
    /// The layer at `dir` over `workspace`, mounted by `keeper`, serving other terminals.
    pub(super) fn serve(
        keeper: Keeper,
        dir: PathBuf,
        workspace: PathBuf,
    ) -> Result<Live, LayerError> {
        let held = Arc::new(Held {
            keeper,
            dir,
            workspace,
            gate: RwLock::new(()),
            discarded: AtomicBool::new(false),
        });
        let serving = held.clone();
        let handler = Box::new(move |op, waiting: &dyn Fn()| serving.apply_blocking(op, waiting));
        let control = control::Server::start(&held.dir, handler)
            .map_err(super::io_at("listen in the layer", &held.dir))?;
        Ok(Live {
            _control: control,
            held,
        })
    }

    /// The layer's merged tree, as this process reaches it.
    pub fn merged(&self) -> PathBuf {
        self.held.keeper.merged()
    }

    /// Held by a call for as long as it runs: the layer's mount stays as it is meanwhile.
    pub async fn using(&self) -> RwLockReadGuard<'_, ()> {
        self.held.gate.read().await
    }

    /// Does `op`, once no call is running if it changes the layer.
    pub async fn apply(&self, op: Op) -> Result<Done, LayerError> {
        let (_shared, _alone);
        if op.reads() {
            _shared = self.held.gate.read().await;
        } else {
            _alone = self.held.gate.write().await;
        }
        self.held.apply(op)
    }
}

impl Held {
    /// Does `op` from a thread outside the runtime, alone; `waiting` is told first when a
    /// call is running, whose end it waits for.
    fn apply_blocking(&self, op: Op, waiting: &dyn Fn()) -> Result<Done, LayerError> {
        let _alone = self.gate.try_write().unwrap_or_else(|_| {
            waiting();
            self.gate.blocking_write()
        });
        self.apply(op)
    }

    /// Does `op`, the gate held.
    fn apply(&self, op: Op) -> Result<Done, LayerError> {
        let dir = &self.dir;
        Ok(match op {
            Op::Diff { stat } => Done::Diff(super::diff(dir, &self.workspace, stat)?),
            Op::Checkpoints => op::labels(dir)?,
            // With no change since the last level, only the label is written: the mount,
            // and the commands' sandbox, stay.
            Op::Checkpoint { label } if stack::upper_empty(dir)? => {
                Done::Checkpoint(stack::checkpoint_unmounted(dir, label.as_deref())?)
            }
            Op::Checkpoint { label } => Done::Checkpoint(
                self.remounting(|| stack::checkpoint_unmounted(dir, label.as_deref()))?,
            ),
            Op::Rollback { label } => {
                // A label that names no checkpoint is refused before the mount is touched.
                stack::find(dir, &label)?;
                self.remounting(|| stack::rollback_unmounted(dir, &label))?;
                Done::RolledBack(label)
            }
            Op::Fork { name } => {
                let new = super::dir(&name)?;
                stack::free(&new)?;
                self.remounting(|| stack::fork_unmounted(dir, &new))?;
                Done::Fork(name)
            }
            Op::Accept(accept) => Done::Accepted(
                self.remounting(|| super::accept_unmounted(dir, &self.workspace, &accept))?,
            ),
            Op::Discard => {
                self.remounting(|| stack::empty_unmounted(dir))?;
                self.discarded.store(true, Ordering::Release);
                Done::Discarded { pending: true }
            }
        })
    }

    /// Runs `change` with the layer unmounted, and mounts it again as `change` left it.
    fn remounting<T>(
        &self,
        change: impl FnOnce() -> Result<T, LayerError>,
    ) -> Result<T, LayerError> {
        self.keeper.remounting(change)?
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if self.discarded.load(Ordering::Acquire) {
            self.keeper.end();
            if let Err(e) = super::discard(&self.dir) {
                tracing::warn!("the layer discarded while in use was not removed: {e}");
            }
        }
    }
}
