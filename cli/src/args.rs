//! The command-line contract: global options before the subcommand, then the subcommand.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::LazyLock;

use clap::{Args, Parser, Subcommand};
use cordon::Options;
use cordon::sandbox::Setting;
use cordon::session::Mode;

/// `cordon --version`: cordon's, and the versions of the plugin contract it serves.
static VERSION: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{}\nplugin contract: {}",
        env!("CARGO_PKG_VERSION"),
        cordon::contract::served()
    )
});

/// Run an AI agent's tool calls confined, bounded and observed.
#[derive(Parser)]
#[command(name = "cordon", version = VERSION.as_str(), about, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: Global,
    #[command(subcommand)]
    pub command: Command,
}

/// Options that apply to every subcommand.
#[derive(Args)]
pub struct Global {
    /// The directory the tools work in; relative paths resolve against it.
    #[arg(long, value_name = "DIR", default_value = ".", global = true)]
    pub workspace: PathBuf,

    /// Every knob of the runtime and its sandbox, each also a key of the config file.
    #[command(flatten)]
    pub settings: cordon::Settings,

    /// Whether calls that change things (edit and execute tools) run: `allow` runs them, `ask`
    /// asks first (on the terminal for `call`, through the protocol for `session` and `mcp`),
    /// `deny` refuses them. Read tools never need permission.
    #[arg(
        long,
        value_enum,
        value_name = "MODE",
        default_value = "allow",
        global = true
    )]
    pub permissions: Permissions,

    /// How many lines of a call's output the display shows.
    #[arg(long, value_name = "N", default_value_t = 5, global = true)]
    pub preview_lines: usize,

    /// cordon's config file, where the user allows plugins more than the defaults and sets
    /// any of these options for every start [default: ~/.config/cordon/config.toml when it
    /// exists].
    #[arg(long, value_name = "FILE", global = true)]
    pub config: Option<PathBuf>,

    /// What cordon logs on standard error: error, warn, info, debug or trace [default: info;
    /// warn for `cordon mcp`, whose client shows standard error to the user]. `RUST_LOG`,
    /// when set, takes effect unless this is given.
    #[arg(long, value_enum, value_name = "LEVEL", global = true)]
    pub log_level: Option<LogLevel>,
}

impl Global {
    /// The runtime options these flags describe.
    pub fn options(&self) -> Options {
        let mut options = Options::new(&self.workspace);
        options.settings = self.settings.clone();
        if let Some(file) = &self.config {
            options.config = Some(file.clone());
        }
        options
    }
}

#[derive(Subcommand)]
pub enum Command {
    /// List the declared tools.
    Tools {
        /// Print a JSON array of {name, description, input_schema, kind, source}.
        #[arg(long)]
        json: bool,
    },
    /// Run one tool call and print exactly its output; exit 0 when it completed, 1 when it
    /// failed.
    Call {
        /// The tool to call.
        tool: String,
        /// The input, a JSON object as text; `-` reads it from standard input.
        #[arg(default_value = "{}")]
        input: String,
        /// Show the call on standard error as an agent's terminal would: a header before it
        /// runs, then the first lines of its output.
        #[arg(long)]
        display: bool,
    },
    /// Work with third-party plugins.
    Plugins {
        #[command(subcommand)]
        command: PluginsCommand,
    },
    /// Serve tool calls as JSON lines on standard input and output (see docs/session.md for the
    /// protocol).
    Session,
    /// Serve the tools to Model Context Protocol clients: over standard input and output, or
    /// with --http over Streamable HTTP (see docs/mcp.md).
    ///
    /// With `--permissions ask` the user is asked through the client (MCP elicitation); a
    /// client that cannot ask gets those calls refused.
    Mcp(McpArgs),
    /// Review, accept or discard the changes of a layer, checkpoint, roll back or fork it (see
    /// --layer and docs/layers.md). A cordon running in the layer does what changes it
    /// between its calls.
    Layer {
        #[command(subcommand)]
        command: LayerCommand,
    },
    /// Run one bash command (`true`) in the sandbox, with the options given, and print each
    /// layer of its confinement (enforced, partial or off, and what holds); exit 1 with the
    /// reason when the sandbox cannot be set up.
    Doctor {
        /// Print {ran, refusal, layers: [{name, enforcement, detail}]} as JSON.
        #[arg(long)]
        json: bool,
    },
}

/// `cordon mcp`'s own options: the Streamable HTTP server.
#[derive(Args)]
#[command(next_help_heading = "Streamable HTTP")]
pub struct McpArgs {
    /// Serve MCP over Streamable HTTP at this address and port, under the path /mcp (for
    /// example 127.0.0.1:8931; port 0 picks a free one), instead of over standard input and
    /// output. Every request must carry the bearer token.
    #[arg(long, value_name = "ADDR:PORT")]
    pub http: Option<SocketAddr>,

    /// The bearer token clients must send (`Authorization: Bearer TOKEN`): the first line of
    /// FILE [default: a new random token, printed once to standard error].
    #[arg(
        long,
        value_name = "FILE",
        requires = "http",
        conflicts_with = "http_no_auth"
    )]
    pub http_token_file: Option<PathBuf>,

    /// Take requests without a token, for local clients that cannot send one. Accepted only on
    /// a loopback address.
    #[arg(long, requires = "http")]
    pub http_no_auth: bool,

    /// Let --http listen on an address that other machines can reach (not loopback). Anyone
    /// with the token can then run commands on this machine; cordon serves plain HTTP, so put
    /// a TLS proxy in front.
    #[arg(long, requires = "http")]
    pub http_allow_remote: bool,

    /// Also take requests whose Host header names HOST (a name, or NAME:PORT), besides
    /// localhost, 127.0.0.1, ::1 and the address listened on; repeatable.
    #[arg(long, value_name = "HOST", requires = "http")]
    pub http_allow_host: Vec<String>,

    /// Also take requests from web pages of ORIGIN (scheme://host:port), besides those of
    /// the address listened on and of localhost at its port; repeatable. Requests without an
    /// Origin header (clients that are not browsers) need none.
    #[arg(long, value_name = "ORIGIN", requires = "http")]
    pub http_allow_origin: Vec<String>,

    /// Close an HTTP session after this many seconds without a message from its client or
    /// its calls.
    #[arg(long, value_name = "SECS", default_value_t = 1800, value_parser = clap::value_parser!(u64).range(1..), requires = "http")]
    pub http_session_idle: u64,

    /// Also offer the model the tools of the workspace's layer (--layer): layer_diff,
    /// layer_checkpoint and layer_rollback. Accept and discard stay the user's.
    #[arg(long, help_heading = "Layer")]
    pub layer_tools: bool,
}

#[derive(Subcommand)]
pub enum PluginsCommand {
    /// Load a plugin (`NAME.wasm` with `NAME.toml` beside it) as a plugin directory would, and
    /// print what it declares and would be granted; exit 2 with the reason when it would be
    /// refused.
    Check {
        /// The component file.
        path: PathBuf,
    },
}

#[derive(Subcommand)]
pub enum LayerCommand {
    /// Print the layer's changes against the workspace as a unified diff that `git apply`
    /// takes (protected paths among them are named on standard error).
    Diff {
        /// The layer: a name or a path, as --layer takes it.
        layer: String,
        /// Print a summary per file instead, as `git diff --stat`.
        #[arg(long)]
        stat: bool,
    },
    /// Copy the layer's changes (all, or those at or below PATHS) into the workspace, each file
    /// atomically, and take them out of the layer. A change to a protected path is refused
    /// unless named with --unprotect; then nothing is accepted.
    Accept {
        /// The layer: a name or a path, as --layer takes it.
        layer: String,
        /// Paths relative to the workspace; the default is every change.
        paths: Vec<PathBuf>,
    },
    /// Drop the layer and every change in it (the levels its forks share stay theirs). A
    /// cordon running in it drops the changes at once and the layer when it ends.
    Discard {
        /// The layer: a name or a path, as --layer takes it.
        layer: String,
    },
    /// Name the layer's current state, to roll back to; print the checkpoint's label.
    Checkpoint {
        /// The layer: a name or a path, as --layer takes it.
        layer: String,
        /// The checkpoint's label [default: the next free number].
        label: Option<String>,
    },
    /// Bring the layer back to a checkpoint, byte for byte: what changed since is dropped,
    /// and so are the checkpoints taken after it.
    Rollback {
        /// The layer: a name or a path, as --layer takes it.
        layer: String,
        /// The checkpoint's label.
        label: String,
    },
    /// List the layer's checkpoints, the oldest first.
    Checkpoints {
        /// The layer: a name or a path, as --layer takes it.
        layer: String,
    },
    /// Make a new layer that starts from this one's current state, sharing what it holds
    /// (nothing is copied); each then changes on its own.
    Fork {
        /// The layer: a name or a path, as --layer takes it.
        layer: String,
        /// The new layer: a name or a path.
        new: String,
    },
}

impl LayerCommand {
    /// The layer the command acts on.
    pub fn layer(&self) -> &str {
        match self {
            LayerCommand::Diff { layer, .. }
            | LayerCommand::Accept { layer, .. }
            | LayerCommand::Discard { layer }
            | LayerCommand::Checkpoint { layer, .. }
            | LayerCommand::Rollback { layer, .. }
            | LayerCommand::Checkpoints { layer }
            | LayerCommand::Fork { layer, .. } => layer,
        }
    }
}

/// `--log-level`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

impl LogLevel {
    /// The level as a tracing filter directive names it.
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
            LogLevel::Trace => "trace",
        }
    }
}

/// `--permissions`: the session's [`Mode`], as the command line spells it.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum Permissions {
    /// Run calls that need permission.
    Allow,
    /// Ask the user before each (an "always" answer holds for the rest of the session).
    Ask,
    /// Refuse them all.
    Deny,
}

impl From<Permissions> for Mode {
    fn from(permissions: Permissions) -> Self {
        match permissions {
            Permissions::Allow => Mode::Allow,
            Permissions::Ask => Mode::Ask,
            Permissions::Deny => Mode::Deny,
        }
    }
}

/// The wording of the settings that cordon's texts name: the flag that sets each, so that a
/// user is told what to type (installed first thing in `main`).
pub fn flag(setting: &Setting) -> String {
    match setting {
        Setting::AllowDomain(host) => format!("--allow-domain {host}"),
        Setting::AllowDomainSet(set) => format!("--allow-domain @{set}"),
        Setting::Allowlist => "--allow-domain".into(),
        Setting::BashNetwork => "--bash-network".into(),
        Setting::Unprotect(path) => format!("--unprotect {path}"),
        Setting::AllowMissing(layer) => format!("--sandbox-allow-missing {layer}"),
        Setting::Unconfined => "--unconfined-bash".into(),
        Setting::Toolchains => "--toolchains".into(),
        Setting::MaxTimeout => "--max-timeout".into(),
        Setting::BashRead => "--bash-read".into(),
        Setting::BashWrite => "--bash-write".into(),
        Setting::BashPath => "--bash-path".into(),
        Setting::BashHome(value) => valued("--bash-home", value),
        Setting::Skills => "--skills".into(),
        Setting::Plugins(value) => valued("--plugins", value),
        Setting::CacheDir(value) => valued("--cache-dir", value),
        Setting::Workspace => "--workspace".into(),
        Setting::ConfigFile(value) => valued("--config", value),
    }
}

/// `flag`, followed by its value when one is suggested.
fn valued(flag: &str, value: &Option<String>) -> String {
    match value {
        Some(value) => format!("{flag} {value}"),
        None => flag.to_string(),
    }
}
