//! Section 5, `mcp`: `cordon mcp` against the official `@modelcontextprotocol/server-filesystem`
//! over stdio, each reading the same 4 KiB file: the time from spawning a server to its first
//! response (target: at least 10× sooner) and tool calls per second in one connection (target:
//! at least 3×); and, for information, `cordon mcp` on Tokio's blocking stdio (over a socket).
//! Skipped, with the reason, when `node` or the package is not to be had.

use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::fixture::Dirs;
use crate::harness::{fmt, median, print_samples, ratio, samples};
use crate::mcp_client::{Client, cordon_mcp, cordon_supports_mcp};
use crate::npm::npm_server;
use crate::report::Report;

/// A server under test: how to start it and how to read the 4 KiB file with it.
struct Server<'a> {
    name: &'static str,
    command: Box<dyn Fn() -> Command + 'a>,
    tool: &'static str,
    arguments: Value,
}

pub(crate) fn run(dirs: &Dirs, report: &mut Report) {
    println!("\n# 5. `cordon mcp` vs @modelcontextprotocol/server-filesystem over stdio");
    let skip = |report: &mut Report, why: String| {
        println!("  skipped: {why}");
        report.row(
            "`cordon mcp` vs server-filesystem: calls/s and first response",
            format!("skipped: {why}"),
            "-".into(),
            "≥ 3× calls/s; ≥ 10× sooner",
            None,
        );
    };
    if !cordon_supports_mcp() {
        return skip(report, "this cordon has no `mcp` subcommand".into());
    }
    let entry = match npm_server(dirs) {
        Ok(entry) => entry,
        Err(why) => return skip(report, why),
    };
    let ws = dirs.ws.clone();
    let file = dirs.path("4k.txt");
    let expected = std::fs::read_to_string(&file).unwrap();
    let servers = [
        Server {
            name: "cordon mcp",
            command: Box::new(|| cordon_mcp(dirs)),
            tool: "read_file",
            arguments: json!({"path": "4k.txt"}),
        },
        Server {
            name: "server-filesystem (node)",
            command: Box::new(move || {
                let mut c = Command::new("node");
                c.arg(&entry).arg(&ws);
                c
            }),
            tool: "read_text_file",
            arguments: json!({"path": file}),
        },
    ];

    // Time to the first response: from spawning the server to the `initialize` result.
    let n = samples(20);
    let mut first = vec![Vec::new(); servers.len()];
    for _ in 0..n {
        for (server, first) in servers.iter().zip(&mut first) {
            let started = Instant::now();
            let mut client = Client::spawn(&mut (server.command)());
            client.initialize();
            first.push(started.elapsed());
            client.close();
        }
    }
    for (server, first) in servers.iter().zip(&mut first) {
        first.sort();
        print_samples(&format!("{}: first response", server.name), first);
    }

    // Throughput: sequential calls of the same read, in one connection each.
    let calls = samples(2000);
    let mut rates = Vec::new();
    for server in &servers {
        let client = Client::spawn(&mut (server.command)());
        let elapsed = time_calls(client, server, &expected, calls);
        let rate = calls as f64 / elapsed.as_secs_f64();
        println!(
            "  {:<44} {rate:>8.0} calls/s ({} per call, {calls} calls)",
            server.name,
            fmt(elapsed / calls as u32)
        );
        rates.push(rate);
    }
    // The same over a socket: `cordon mcp` with Tokio's blocking standard streams.
    let client = Client::spawn_on_socket(&mut cordon_mcp(dirs));
    let blocking = time_calls(client, &servers[0], &expected, calls);
    println!(
        "  {:<44} {:>8.0} calls/s ({} per call)",
        "cordon mcp, blocking stdio (over a socket)",
        calls as f64 / blocking.as_secs_f64(),
        fmt(blocking / calls as u32)
    );
    let blocking_rate = calls as f64 / blocking.as_secs_f64();
    report.row(
        "`cordon mcp` over a socket (Tokio's blocking stdio instead of non-blocking pipes)",
        format!("{blocking_rate:.0} calls/s"),
        format!("{:.1}× server-filesystem", blocking_rate / rates[1]),
        "(information)",
        None,
    );
    let r = rates[0] / rates[1];
    report.row(
        "`cordon mcp` vs server-filesystem: `read` tool calls per second (4 KiB file)",
        format!("{:.0} vs {:.0} calls/s", rates[0], rates[1]),
        format!("{r:.1}×"),
        "≥ 3×",
        Some(r >= 3.0),
    );
    let (c, s) = (median(&first[0]), median(&first[1]));
    let r = ratio(s, c);
    report.row(
        "`cordon mcp` vs server-filesystem: time to first response after start",
        format!("{} vs {}", fmt(c), fmt(s)),
        format!("{r:.1}× sooner"),
        "≥ 10× sooner",
        Some(r >= 10.0),
    );
}

/// Initializes `client` (a fresh connection to `server`), warms it up with 50 reads, each
/// checked to start with `expected`, then times `calls` reads in a row; closes the client and
/// returns that time.
fn time_calls(mut client: Client, server: &Server<'_>, expected: &str, calls: usize) -> Duration {
    client.initialize();
    for _ in 0..50 {
        let text = client.call(server.tool, &server.arguments);
        assert!(text.starts_with(expected), "{}: {text}", server.name);
    }
    let started = Instant::now();
    for _ in 0..calls {
        client.call(server.tool, &server.arguments);
    }
    let elapsed = started.elapsed();
    client.close();
    elapsed
}
