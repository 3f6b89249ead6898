//! The command-line contract: global options before the subcommand, then the subcommand.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::LazyLock;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use cordon::Options;
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

    /// The most characters of output the model sees from one call; the rest is cut with a
    /// notice.
    #[arg(long, value_name = "CHARS", default_value_t = cordon::options::DEFAULT_MAX_OUTPUT, global = true)]
    pub max_output: usize,

    /// Do not declare read_file, write_file and edit_file.
    #[arg(long, global = true)]
    pub no_edit_tools: bool,

    /// The skills directory: `<name>.md` or `<name>/SKILL.md` files for read_skill.
    #[arg(long, value_name = "DIR", global = true)]
    pub skills: Option<PathBuf>,

    /// Seconds a bash command may run before its whole process tree is killed.
    #[arg(long, value_name = "SECS", default_value_t = cordon::shell::DEFAULT_TIMEOUT.as_secs(), value_parser = clap::value_parser!(u64).range(1..), global = true)]
    pub timeout: u64,

    /// The most seconds a bash call may ask for with its `timeout` field [default: the config
    /// file's `[bash] max_timeout`, else 600; never below --timeout].
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..), global = true)]
    pub max_timeout: Option<u64>,

    /// Run bash commands without the kernel confinement (namespaces, Landlock, seccomp,
    /// dropped capabilities) when the kernel cannot enforce it. Timeout, process-tree kill and
    /// output bound still apply.
    #[arg(long, global = true)]
    pub unconfined_bash: bool,

    /// Let bash commands run without these layers of the sandbox when the kernel cannot
    /// enforce them (the other layers still apply; `cordon doctor` shows what holds).
    #[arg(long, value_name = "LAYER[,LAYER]", value_delimiter = ',', value_parser = clap::builder::PossibleValuesParser::new(cordon::shell::OPTIONAL_LAYERS), global = true)]
    pub sandbox_allow_missing: Vec<String>,

    /// Let bash commands also read (and execute from) this file or directory; repeatable.
    #[arg(long, value_name = "PATH", global = true)]
    pub bash_read: Vec<PathBuf>,

    /// Let bash commands also write this file or directory; repeatable.
    #[arg(long, value_name = "PATH", global = true)]
    pub bash_write: Vec<PathBuf>,

    /// Give bash commands this variable: `NAME=VALUE` sets it, `NAME` passes cordon's own
    /// value through, `PREFIX*` passes every variable starting with PREFIX except those whose
    /// names look like secrets (TOKEN, SECRET, KEY, PASSWORD, CREDENTIAL), which pass only
    /// when named exactly; repeatable.
    #[arg(long, value_name = "NAME[=VALUE]", global = true)]
    pub bash_env: Vec<String>,

    /// Put this directory before the fixed PATH of bash commands (and let them read it);
    /// repeatable.
    #[arg(long, value_name = "DIR", global = true)]
    pub bash_path: Vec<PathBuf>,

    /// The home directory of bash commands: `workspace` (one per workspace, kept between
    /// calls and sessions, under ~/.local/share/cordon/homes), `private` (empty at every
    /// call) or a directory [default: workspace].
    #[arg(long, value_name = "workspace|private|DIR", global = true)]
    pub bash_home: Option<String>,

    /// Let bash commands use the user's toolchains found on this machine (rustup and cargo,
    /// pyenv, nvm, Go, uv, pipx, ~/.local/bin): each read-only, on PATH, with its variables,
    /// its download caches writable. `cordon --toolchains doctor` lists them.
    #[arg(long, global = true)]
    pub toolchains: bool,

    /// Let every tool write this protected path of the workspace (a git hook or config,
    /// .envrc, .vscode, ...) and what is below it; repeatable.
    #[arg(long, value_name = "PATH", global = true)]
    pub unprotect: Vec<PathBuf>,

    /// See and change the workspace through this copy-on-write layer (a name, kept under
    /// ~/.local/share/cordon/layers, or a directory path with a `/`); the workspace changes
    /// only at `cordon layer accept`. See docs/layers.md.
    #[arg(long, value_name = "NAME", global = true)]
    pub layer: Option<String>,

    /// Let bash commands use the whole network: every address and port, the host's own
    /// services and the cloud metadata address included. --allow-domain is the narrow way.
    #[arg(long, global = true)]
    pub bash_network: bool,

    /// Let bash commands reach this host through cordon's proxy: a name (pypi.org), a wildcard
    /// of subdomains (*.githubusercontent.com, not the name itself) or an address, optionally
    /// with :PORT (default: 80 and 443), or a named set of hosts: @pypi, @npm, @crates, @go,
    /// @github, @rubygems, @maven; repeatable. Every other connection is refused.
    #[arg(long, value_name = "PATTERN", global = true)]
    pub allow_domain: Vec<String>,

    /// Have cordon's proxy connect to ADDRESS for NAME instead of resolving it (as
    /// /etc/hosts would), even when ADDRESS is a loopback or private one; repeatable.
    #[arg(long, value_name = "NAME=ADDRESS", global = true)]
    pub add_host: Vec<String>,

    /// The memory limit of a bash command's whole process tree, in MiB (a memory cgroup;
    /// where cordon cannot create one, each process's address-space limit instead).
    #[arg(long, value_name = "MIB", default_value_t = cordon::shell::DEFAULT_MEMORY_LIMIT >> 20, value_parser = clap::value_parser!(u64).range(1..), global = true)]
    pub bash_memory: u64,

    /// How many processes and threads a bash command may have at once.
    #[arg(long, value_name = "N", default_value_t = cordon::shell::DEFAULT_MAX_PROCESSES, value_parser = clap::value_parser!(u32).range(1..), global = true)]
    pub bash_max_processes: u32,

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

    /// A directory of third-party plugins (`NAME.wasm` with its manifest `NAME.toml`);
    /// repeatable. `~/.config/cordon/plugins` is used too when it exists.
    #[arg(long = "plugins", value_name = "DIR", global = true)]
    pub plugin_dirs: Vec<PathBuf>,

    /// cordon's config file, where the user allows plugins more than the defaults
    /// [default: ~/.config/cordon/config.toml when it exists].
    #[arg(long, value_name = "FILE", global = true)]
    pub config: Option<PathBuf>,

    /// What cordon logs on standard error: error, warn, info, debug or trace [default: info;
    /// warn for `cordon mcp`, whose client shows standard error to the user]. `RUST_LOG`,
    /// when set, takes effect unless this is given.
    #[arg(long, value_enum, value_name = "LEVEL", global = true)]
    pub log_level: Option<LogLevel>,

    /// Where compiled plugins are cached [default: $CORDON_CACHE_DIR, else
    /// $XDG_CACHE_HOME/cordon, else ~/.cache/cordon].
    #[arg(long, value_name = "DIR", global = true)]
    pub cache_dir: Option<PathBuf>,
}

impl Global {
    /// The runtime options these flags describe.
    pub fn options(&self) -> Options {
        let mut options = Options::new(&self.workspace);
        options.max_output = self.max_output;
        options.edit_tools = !self.no_edit_tools;
        options.skills = self.skills.clone();
        options.shell.timeout = Duration::from_secs(self.timeout);
        options.shell.unconfined = self.unconfined_bash;
        options.bash = cordon::config::BashSettings {
            read: self.bash_read.clone(),
            write: self.bash_write.clone(),
            env: self.bash_env.clone(),
            path: self.bash_path.clone(),
            unprotect: self.unprotect.clone(),
            home: self.bash_home.clone(),
            toolchains: self.toolchains,
            max_timeout: self.max_timeout,
        };
        options.network = cordon::config::NetworkSettings {
            allow: self.allow_domain.clone(),
            hosts: self.add_host.clone(),
        };
        if self.bash_network {
            options.shell.network = cordon::shell::Network::Open;
        }
        options.shell.memory_limit = Some(self.bash_memory << 20);
        options.shell.max_processes = self.bash_max_processes;
        options.shell.allow_missing = self.sandbox_allow_missing.clone();
        options.plugin_dirs.extend(self.plugin_dirs.iter().cloned());
        if let Some(file) = &self.config {
            options.config = Some(file.clone());
        }
        if let Some(dir) = &self.cache_dir {
            options.cache_dir = Some(dir.clone());
        }
        options.layer = self.layer.clone();
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
    /// Review, accept or discard the changes of a layer (see --layer and docs/layers.md).
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
    /// Drop the layer and every change in it.
    Discard {
        /// The layer: a name or a path, as --layer takes it.
        layer: String,
    },
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
