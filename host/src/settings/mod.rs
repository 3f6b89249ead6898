//! Every knob of the runtime and of its bash sandbox, in one typed struct: [`Settings`].
//!
//! The command line and cordon's config file fill the same struct, so every knob exists in
//! both: a field is a config key (its table and name, by serde) and, with the `cli` feature,
//! a flag of the `cordon` command (its `#[arg]`, by clap; the field's documentation is its
//! help). Each value is parsed by its type's one `FromStr` ([`value`]) wherever it is read, so
//! a bad value is refused there, with the same reason.
//!
//! The two are joined in one place, [`Layers`]: a value the command line gives wins over the
//! file's, lists join (the file's first). Defaults are applied where the settings are resolved
//! ([`crate::resolve`]), one line per knob.

pub mod value;

use std::path::PathBuf;

use serde::Deserialize;

use crate::sandbox::OptionalLayer;
pub use value::{Allow, Home, Mapping, Mib, Processes, Secs, ValueError, Variable};

/// Every knob, as one source gives it: none or empty where it says nothing.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
#[serde(deny_unknown_fields)]
pub struct Settings {
    /// The config file's `[tools]` table.
    #[serde(default)]
    #[cfg_attr(feature = "cli", command(flatten))]
    pub tools: Tools,
    /// The config file's `[bash]` table.
    #[serde(default)]
    #[cfg_attr(feature = "cli", command(flatten))]
    pub bash: Bash,
    /// The config file's `[network]` table.
    #[serde(default)]
    #[cfg_attr(feature = "cli", command(flatten))]
    pub network: Network,
}

/// The tools declared and what they see.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
#[serde(deny_unknown_fields)]
pub struct Tools {
    /// The most characters of output the model sees from one call; the rest is cut with a
    /// notice [default: 30000].
    #[cfg_attr(feature = "cli", arg(long, value_name = "CHARS", global = true))]
    pub max_output: Option<usize>,

    /// Do not declare read_file, write_file and edit_file.
    #[cfg_attr(
        feature = "cli",
        arg(
            long = "no-edit-tools",
            num_args = 0,
            default_missing_value = "false",
            global = true
        )
    )]
    pub edit_tools: Option<bool>,

    /// The skills directory: `<name>.md` or `<name>/SKILL.md` files for read_skill.
    #[cfg_attr(feature = "cli", arg(long, value_name = "DIR", global = true))]
    pub skills: Option<PathBuf>,

    /// A directory of third-party plugins (`NAME.wasm` with its manifest `NAME.toml`);
    /// repeatable. `~/.config/cordon/plugins` is used too when it exists.
    #[serde(default)]
    #[cfg_attr(
        feature = "cli",
        arg(long = "plugins", value_name = "DIR", global = true)
    )]
    pub plugin_dirs: Vec<PathBuf>,

    /// Where compiled plugins are cached [default: $CORDON_CACHE_DIR, else
    /// $XDG_CACHE_HOME/cordon, else ~/.cache/cordon].
    #[cfg_attr(feature = "cli", arg(long, value_name = "DIR", global = true))]
    pub cache_dir: Option<PathBuf>,

    /// See and change the workspace through this copy-on-write layer (a name, kept under
    /// ~/.local/share/cordon/layers, or a directory path with a `/`); the workspace changes
    /// only at `cordon layer accept`. See docs/layers.md.
    #[cfg_attr(feature = "cli", arg(long, value_name = "NAME", global = true))]
    pub layer: Option<String>,
}

/// How bash commands run.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
#[serde(deny_unknown_fields)]
pub struct Bash {
    /// Seconds a bash command may run before its whole process tree is killed [default: 30].
    #[cfg_attr(feature = "cli", arg(long, value_name = "SECS", global = true))]
    pub timeout: Option<Secs>,

    /// The most seconds a bash call may ask for with its `timeout` field [default: 600; never
    /// below --timeout].
    #[cfg_attr(feature = "cli", arg(long, value_name = "SECS", global = true))]
    pub max_timeout: Option<Secs>,

    /// Run bash commands without the kernel confinement (namespaces, Landlock, seccomp,
    /// dropped capabilities) when the kernel cannot enforce it. Timeout, process-tree kill and
    /// output bound still apply.
    #[cfg_attr(
        feature = "cli",
        arg(
            long = "unconfined-bash",
            num_args = 0,
            default_missing_value = "true",
            global = true
        )
    )]
    pub unconfined: Option<bool>,

    /// Let bash commands run without these layers of the sandbox when the kernel cannot
    /// enforce them (the other layers still apply; `cordon doctor` shows what holds).
    #[serde(default)]
    #[cfg_attr(feature = "cli", arg(
        long = "sandbox-allow-missing",
        value_name = "LAYER[,LAYER]",
        value_delimiter = ',',
        value_parser = layers(),
        global = true
    ))]
    pub allow_missing: Vec<OptionalLayer>,

    /// Let bash commands also read (and execute from) this file or directory; repeatable.
    #[serde(default)]
    #[cfg_attr(
        feature = "cli",
        arg(long = "bash-read", value_name = "PATH", global = true)
    )]
    pub read: Vec<PathBuf>,

    /// Let bash commands also write this file or directory; repeatable.
    #[serde(default)]
    #[cfg_attr(
        feature = "cli",
        arg(long = "bash-write", value_name = "PATH", global = true)
    )]
    pub write: Vec<PathBuf>,

    /// Give bash commands this variable: `NAME=VALUE` sets it, `NAME` passes cordon's own
    /// value through, `PREFIX*` passes every variable starting with PREFIX except those whose
    /// names look like secrets (TOKEN, SECRET, KEY, PASSWORD, CREDENTIAL), which pass only
    /// when named exactly; repeatable.
    #[serde(default)]
    #[cfg_attr(
        feature = "cli",
        arg(long = "bash-env", value_name = "NAME[=VALUE]", global = true)
    )]
    pub env: Vec<Variable>,

    /// Put this directory before the fixed PATH of bash commands (and let them read it);
    /// repeatable.
    #[serde(default)]
    #[cfg_attr(
        feature = "cli",
        arg(long = "bash-path", value_name = "DIR", global = true)
    )]
    pub path: Vec<PathBuf>,

    /// The home directory of bash commands: `workspace` (one per workspace, kept between
    /// calls and sessions, under ~/.local/share/cordon/homes), `private` (empty at every
    /// call) or a directory [default: workspace].
    #[cfg_attr(
        feature = "cli",
        arg(
            long = "bash-home",
            value_name = "workspace|private|DIR",
            global = true
        )
    )]
    pub home: Option<Home>,

    /// Let bash commands use the user's toolchains found on this machine (rustup and cargo,
    /// pyenv, nvm, Go, uv, pipx, ~/.local/bin): each read-only, on PATH, with its variables,
    /// its download caches writable. `cordon --toolchains doctor` lists them.
    #[cfg_attr(
        feature = "cli",
        arg(long, num_args = 0, default_missing_value = "true", global = true)
    )]
    pub toolchains: Option<bool>,

    /// Let every tool write this protected path of the workspace (a git hook or config,
    /// .envrc, .vscode, ...) and what is below it; repeatable.
    #[serde(default)]
    #[cfg_attr(feature = "cli", arg(long, value_name = "PATH", global = true))]
    pub unprotect: Vec<PathBuf>,

    /// The memory limit of a bash command's whole process tree, in MiB (a memory cgroup;
    /// where cordon cannot create one, each process's address-space limit instead)
    /// [default: 4096].
    #[cfg_attr(
        feature = "cli",
        arg(long = "bash-memory", value_name = "MIB", global = true)
    )]
    pub memory: Option<Mib>,

    /// How many MiB of a bash command's output cordon keeps from its start, and as many from
    /// its end; what lies between is counted, not kept [default: 1].
    #[cfg_attr(
        feature = "cli",
        arg(long = "bash-output-cap", value_name = "MIB", global = true)
    )]
    pub output_cap: Option<Mib>,

    /// How many processes and threads a bash command may have at once [default: 512].
    #[cfg_attr(
        feature = "cli",
        arg(long = "bash-max-processes", value_name = "N", global = true)
    )]
    pub max_processes: Option<Processes>,
}

/// What bash commands may reach on the network.
#[derive(Clone, Debug, Default, Deserialize)]
#[cfg_attr(feature = "cli", derive(clap::Args))]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// Let bash commands use the whole network: every address and port, the host's own
    /// services and the cloud metadata address included. --allow-domain is the narrow way.
    #[cfg_attr(
        feature = "cli",
        arg(
            long = "bash-network",
            num_args = 0,
            default_missing_value = "true",
            global = true
        )
    )]
    pub open: Option<bool>,

    /// Let bash commands reach this host through cordon's proxy: a name (pypi.org), a wildcard
    /// of subdomains (*.githubusercontent.com, not the name itself) or an address, optionally
    /// with :PORT (default: 80 and 443), or a named set of hosts: @pypi, @npm, @crates, @go,
    /// @github, @rubygems, @maven; repeatable. Every other connection is refused.
    #[serde(default)]
    #[cfg_attr(
        feature = "cli",
        arg(long = "allow-domain", value_name = "PATTERN", global = true)
    )]
    pub allow: Vec<Allow>,

    /// Have cordon's proxy connect to ADDRESS for NAME instead of resolving it (as
    /// /etc/hosts would), even when ADDRESS is a loopback or private one; repeatable.
    #[serde(default)]
    #[cfg_attr(
        feature = "cli",
        arg(long = "add-host", value_name = "NAME=ADDRESS", global = true)
    )]
    pub hosts: Vec<Mapping>,
}

/// `--sandbox-allow-missing`: the layers' names, which clap lists when one is not among them,
/// read by [`OptionalLayer`]'s `FromStr`.
#[cfg(feature = "cli")]
fn layers() -> impl clap::builder::TypedValueParser<Value = OptionalLayer> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(crate::sandbox::OPTIONAL_LAYERS)
        .try_map(|name| name.parse::<OptionalLayer>())
}

/// The config file's settings under the command line's: where the two are joined.
#[derive(Clone, Copy, Debug)]
pub struct Layers<'a> {
    /// cordon's config file.
    pub file: &'a Settings,
    /// The command line (or an embedder's own).
    pub given: &'a Settings,
}

impl<'a> Layers<'a> {
    /// The value of a knob: the one given, else the file's.
    pub fn last<T: 'a>(&self, knob: fn(&Settings) -> &Option<T>) -> Option<&'a T> {
        knob(self.given).as_ref().or(knob(self.file).as_ref())
    }

    /// The entries of a list: the file's, then those given.
    pub fn all<T: 'a>(
        &self,
        knob: fn(&Settings) -> &Vec<T>,
    ) -> impl Iterator<Item = &'a T> + use<'a, T> {
        knob(self.file).iter().chain(knob(self.given))
    }
}
