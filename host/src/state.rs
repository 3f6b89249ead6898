//! The per-call store data: the plugin's WASI context, its capabilities and its limits.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use wasmtime::ResourceLimiter;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::p2::{OutputStream, Pollable, StreamResult};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{WasiHttpCtx, WasiHttpCtxView, WasiHttpView};

use crate::grants::Roots;
use crate::grants::{Grants, HttpGrant};

/// How much of a plugin's stdout and stderr (together) is kept for the log.
const CAPTURE_BYTES: usize = 64 * 1024;
/// The most table elements, instances, tables and memories an instance may have.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;
const MAX_INSTANCES: usize = 64;

/// The data of one plugin instance's store.
pub(crate) struct State {
    wasi: WasiCtx,
    table: ResourceTable,
    pub(crate) limiter: Limiter,
    pub(crate) grants: Arc<Grants>,
    pub(crate) roots: Arc<Roots>,
    pub(crate) stdio: Capture,
    /// A dry run: every directory is mounted read-only and the `files` capability refuses,
    /// whatever the plugin does with `context.dry-run`. A permission preview runs before the
    /// user has answered, so it must not be able to change anything.
    pub(crate) dry_run: bool,
    /// The layers of confinement of the last shell command the plugin ran.
    pub(crate) sandbox: Vec<crate::sandbox::Layer>,
    /// How the last shell command the plugin ran ended.
    pub(crate) exit: Option<crate::sandbox::Status>,
    /// The connections the proxy refused to the plugin's shell commands.
    pub(crate) blocked: Vec<crate::sandbox::Blocked>,
    /// The refusals of the plugin's own writes to protected paths (`caps::fs`).
    pub(crate) protected: Vec<String>,
    /// What the front door follows the call's shell commands with.
    pub(crate) watch: crate::watch::Watch,
    /// Given when the call is given up: its shell commands' trees are killed.
    pub(crate) stop: Option<crate::sandbox::Stop>,
    /// The characters of output the model will see of the call (its context's `max-output`):
    /// a shell command's output is cut to its two ends within it.
    pub(crate) max_output: usize,
    http: WasiHttpCtx,
    hooks: HttpHooks,
}

/// The `wasi:http` hooks of one instance ([`crate::caps::http`]): its grant decides every
/// request.
pub(crate) struct HttpHooks {
    pub grant: Option<Arc<HttpGrant>>,
}

impl State {
    /// A fresh state with exactly the plugin's grants (read-only throughout for a `dry_run`).
    /// Fails only if a granted directory cannot be opened.
    pub(crate) fn new(
        grants: Arc<Grants>,
        roots: Arc<Roots>,
        memory: usize,
        dry_run: bool,
    ) -> std::io::Result<Self> {
        let stdio = Capture::default();
        let mut wasi = WasiCtxBuilder::new();
        // File reads and writes finish quickly; running them on the calling thread instead of
        // a blocking pool cuts a 4 KiB read from ~350 µs to ~60 µs (measured, wasmtime 48).
        // It must be set before the preopens, each of which captures it.
        wasi.allow_blocking_current_thread(true)
            .stdout(stdio.clone())
            .stderr(stdio.clone())
            .initial_cwd(grants.cwd.to_string_lossy());
        for (key, value) in &grants.env {
            wasi.env(key, value);
        }
        for dir in &grants.dirs {
            let perms = if dir.writable && !dry_run {
                FsPerms::ReadWrite
            } else {
                FsPerms::ReadOnly
            };
            let path = dir.path.to_string_lossy();
            wasi.preopened_dir(dir.opened(), &*path, perms)
                .map_err(std::io::Error::other)?;
        }
        let hooks = HttpHooks {
            grant: grants.http.clone(),
        };
        Ok(State {
            wasi: wasi.build(),
            table: ResourceTable::new(),
            limiter: Limiter {
                memory,
                exceeded: false,
            },
            grants,
            roots,
            stdio,
            dry_run,
            sandbox: Vec::new(),
            exit: None,
            blocked: Vec::new(),
            protected: Vec::new(),
            watch: Default::default(),
            stop: None,
            max_output: usize::MAX,
            http: WasiHttpCtx::new(),
            hooks,
        })
    }
}

impl WasiHttpView for State {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.hooks,
        }
    }
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

/// Bounds an instance's memory, and remembers whether the plugin hit the bound so a failed
/// call can say why.
pub(crate) struct Limiter {
    memory: usize,
    pub(crate) exceeded: bool,
}

impl ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _: usize,
        desired: usize,
        _: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let allowed = desired <= self.memory;
        self.exceeded |= !allowed;
        Ok(allowed)
    }

    fn table_growing(
        &mut self,
        _: usize,
        desired: usize,
        _: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }

    fn instances(&self) -> usize {
        MAX_INSTANCES
    }

    fn tables(&self) -> usize {
        MAX_INSTANCES
    }

    fn memories(&self) -> usize {
        MAX_INSTANCES
    }
}

/// A plugin's stdout and stderr: kept up to a bound for the log, never passed to the host's
/// own stdout (which may be a protocol stream), and never blocking the plugin.
#[derive(Clone, Default)]
pub(crate) struct Capture(Arc<Mutex<Vec<u8>>>);

impl Capture {
    /// What the plugin printed, as far as it was kept.
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }

    fn keep(&self, bytes: &[u8]) {
        let mut buf = self.0.lock().unwrap();
        let room = CAPTURE_BYTES.saturating_sub(buf.len());
        buf.extend_from_slice(&bytes[..bytes.len().min(room)]);
    }
}

impl IsTerminal for Capture {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for Capture {
    fn p2_stream(&self) -> Box<dyn OutputStream> {
        Box::new(self.clone())
    }

    fn async_stream(&self) -> Box<dyn tokio::io::AsyncWrite + Send + Sync> {
        Box::new(self.clone())
    }
}

#[wasmtime_wasi::async_trait]
impl Pollable for Capture {
    async fn ready(&mut self) {}
}

impl OutputStream for Capture {
    fn write(&mut self, bytes: Bytes) -> StreamResult<()> {
        self.keep(&bytes);
        Ok(())
    }

    fn flush(&mut self) -> StreamResult<()> {
        Ok(())
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        Ok(64 * 1024)
    }
}

impl tokio::io::AsyncWrite for Capture {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.keep(buf);
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}
