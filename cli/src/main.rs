//! The `cordon` command line: the runtime's front doors for people and agents.
//!
//! Standard output carries only what the contract says (a tool's output, a tool list, protocol
//! messages); everything else, logs included, goes to standard error.

mod args;
mod doctor;
mod layer;
mod mcp;
mod session;
mod terminal;

use std::io::{Read, Write};
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser;
use cordon::Runtime;
use cordon::session::Session;

use args::{Cli, Command, PluginsCommand};

/// Exit status of a usage error (bad options, unusable workspace), as clap uses.
const USAGE: u8 = 2;

fn main() -> ExitCode {
    // Texts name settings by their flags, in the sandbox helper too (this binary again).
    cordon::sandbox::setting::install(args::flag);
    // The shell capability re-executes this binary as its sandbox helper; that path must run
    // before anything else starts threads.
    cordon::sandbox::run_helper_if_asked();
    let cli = Cli::parse();
    init_logging(&cli);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("cannot start the async runtime");
    match runtime.block_on(run(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("cordon: error: {}", chain(&e));
            ExitCode::from(USAGE)
        }
    }
}

async fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    let mut options = cli.global.options();
    // Only `cordon session` passes ACP tool calls on, whose content is an edit's whole texts.
    options.diffs = matches!(cli.command, Command::Session);
    if let Command::Layer { command } = cli.command {
        let ask = matches!(cli.global.permissions, args::Permissions::Ask);
        return layer::run(command, &options.unprotect()?, ask);
    }
    if let Command::Doctor { json } = cli.command {
        let resolved = options.resolve()?;
        let layers =
            cordon::layer::probe(&resolved.workspace, &resolved.shell).map_err(|e| e.to_string());
        return doctor::run(resolved.shell, resolved.toolchains, layers, json).await;
    }
    // `cordon mcp --http`'s options are checked before the runtime starts: a refusal is quick.
    let http = match &cli.command {
        Command::Mcp(args) => mcp::Http::new(args)?,
        _ => None,
    };
    let mut runtime = match &cli.command {
        // One call needs one plugin: skip starting the others.
        Command::Call { tool, .. } => Runtime::for_tool(options, tool).await?,
        _ => Runtime::new(options).await?,
    };
    let (mode, preview_lines) = (cli.global.permissions.into(), cli.global.preview_lines);
    match cli.command {
        Command::Tools { json } => {
            print_tools(&runtime, json)?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Call {
            tool,
            input,
            display,
        } => {
            let input = if input == "-" {
                let mut text = String::new();
                std::io::stdin()
                    .read_to_string(&mut text)
                    .context("cannot read the input from standard input")?;
                text
            } else {
                input
            };
            let mut session = Session::new(mode);
            let pending = session.prepare_text(&runtime, &tool, &input);
            if display {
                eprintln!("{}", pending.header());
            }
            let finished = session.call(pending, &mut terminal::TerminalAsk).await;
            if display {
                let preview = finished
                    .view(preview_lines)
                    .render_preview(terminal::color());
                if !preview.is_empty() {
                    eprintln!("{preview}");
                }
            }
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(finished.outcome.output.as_bytes())?;
            stdout.flush()?;
            // Nothing is left to do: exiting here skips tearing down the engine and the
            // async runtime, a tenth of a millisecond or two of a one-shot call.
            std::process::exit(i32::from(finished.outcome.failed))
        }
        Command::Plugins {
            command: PluginsCommand::Check { path },
        } => {
            let plugin = runtime.add_plugin_file(&path).await?;
            print!("{}", describe_plugin(plugin));
            Ok(ExitCode::SUCCESS)
        }
        Command::Session => {
            session::serve(&runtime, mode, preview_lines).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Mcp(args) => {
            mcp::serve(runtime, mode, http, args.layer_tools).await?;
            Ok(ExitCode::SUCCESS)
        }
        Command::Doctor { .. } | Command::Layer { .. } => {
            unreachable!("served before the runtime starts")
        }
    }
}

fn print_tools(runtime: &Runtime, json: bool) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    if json {
        let tools: Vec<serde_json::Value> = runtime
            .tools()
            .map(|(plugin, tool)| {
                let d = &tool.declaration;
                serde_json::json!({
                    "name": d.name,
                    "description": d.description,
                    "input_schema": tool.schema.json(),
                    "kind": tool.kind.as_str(),
                    "declared_kind": d.kind.as_str(),
                    "source": plugin.source().to_string(),
                })
            })
            .collect();
        serde_json::to_writer_pretty(&mut stdout, &tools)?;
        writeln!(stdout)?;
    } else {
        for (plugin, tool) in runtime.tools() {
            let d = &tool.declaration;
            let summary = d.description.lines().next().unwrap_or_default();
            writeln!(
                stdout,
                "{:<12} {:<8} {:<10} {summary}{}",
                d.name,
                tool.kind.as_str(),
                plugin.source(),
                raised(tool)
                    .map(|why| format!(" ({why})"))
                    .unwrap_or_default()
            )?;
        }
    }
    Ok(())
}

/// What `cordon plugins check` prints: the plugin's contract version, tools, grants and limits.
fn describe_plugin(plugin: &cordon::plugin::Plugin) -> String {
    let mut text = format!("plugin {} ({})\n", plugin.name(), plugin.source());
    if let cordon::spec::Source::File(path) = plugin.source()
        && let Ok(bytes) = std::fs::read(path)
    {
        text.push_str(&format!(
            "  sha256: {}\n",
            cordon::manifest::sha256_hex(&bytes)
        ));
    }
    text.push_str(&format!(
        "  contract: {} {} (this cordon serves {})\n",
        cordon::contract::PACKAGE,
        plugin.contract().as_str(),
        cordon::contract::served_list()
    ));
    for tool in plugin.tools() {
        let d = &tool.declaration;
        let why = raised(tool)
            .map(|why| format!("; {why}"))
            .unwrap_or_default();
        text.push_str(&format!(
            "  tool {} ({}{why})\n",
            d.name,
            tool.kind.as_str()
        ));
    }
    let grants = plugin.grants();
    for dir in &grants.dirs {
        let access = if dir.writable {
            "read-write"
        } else {
            "read-only"
        };
        text.push_str(&format!("  grant {access}: {}\n", dir.path.display()));
    }
    if grants.shell.is_some() {
        text.push_str("  grant: shell\n");
    }
    for (name, _) in &grants.env {
        text.push_str(&format!("  grant env: {name}\n"));
    }
    let limits = plugin.limits();
    text.push_str(&format!(
        "  limits: {} s per call, {} MiB of memory\n",
        limits.timeout.as_secs_f64(),
        limits.memory >> 20
    ));
    text
}

/// Why a tool is treated as another kind than it declares, if it is: its plugin's grants.
fn raised(tool: &cordon::plugin::Tool) -> Option<String> {
    let declared = tool.declaration.kind;
    (tool.kind != declared).then(|| {
        let grant = if tool.kind == cordon::bindings::Kind::Execute {
            "the shell"
        } else {
            "a write grant"
        };
        format!(
            "declares {}, but its plugin holds {grant}",
            declared.as_str()
        )
    })
}

/// An error with its causes, each once: cordon's messages already include their cause's
/// text, and a cause is only added when the message before it does not say it.
fn chain(error: &anyhow::Error) -> String {
    let mut text = error.to_string();
    for cause in error.chain().skip(1) {
        let cause = cause.to_string();
        if !text.contains(&cause) {
            text.push_str(": ");
            text.push_str(&cause);
        }
    }
    text
}

/// Logs go to standard error: at `--log-level`, else as `RUST_LOG` says, else at `info`, or
/// `warn` for `cordon mcp`, whose clients pass standard error on to the user's screen.
fn init_logging(cli: &Cli) {
    use tracing_subscriber::EnvFilter;
    let quiet = matches!(cli.command, Command::Mcp(_));
    let default = if quiet { "warn" } else { "info" };
    let level = |level: &str| EnvFilter::new(format!("cordon={level}"));
    let filter = match cli.global.log_level {
        Some(chosen) => level(chosen.as_str()),
        None => EnvFilter::try_from_default_env().unwrap_or_else(|_| level(default)),
    };
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(terminal::color())
        .without_time()
        .with_target(false)
        .init();
}
