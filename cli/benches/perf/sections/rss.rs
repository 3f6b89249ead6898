//! Section 6, `rss`: the resident set of an idle `cordon mcp` with every built-in loaded
//! (target: under 30 MiB), the median of three servers; and, for information, what stays
//! resident after a large read and a large edit.

use std::time::Duration;

use serde_json::json;

use crate::fixture::{Dirs, hundred_thousand_lines};
use crate::harness::{MIB, mib, rss_of};
use crate::mcp_client::{Client, cordon_mcp, cordon_supports_mcp};
use crate::report::Report;

pub(crate) fn run(dirs: &Dirs, report: &mut Report) {
    println!("\n# 6. Resident set of an idle `cordon mcp` with every built-in loaded");
    if !cordon_supports_mcp() {
        println!("  skipped: this cordon has no `mcp` subcommand");
        report.row(
            "idle `cordon mcp` resident set",
            "skipped: no `mcp` subcommand".into(),
            "-".into(),
            "< 30 MiB",
            None,
        );
        return;
    }
    let mut sizes = Vec::new();
    for _ in 0..3 {
        let mut client = Client::spawn(&mut cordon_mcp(dirs));
        client.initialize();
        let tools = client.request("tools/list", json!({}));
        let names: Vec<&str> = tools["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect();
        assert_eq!(
            names,
            ["bash", "read_file", "write_file", "edit_file", "read_skill"]
        );
        std::thread::sleep(Duration::from_millis(200));
        sizes.push(rss_of(&client.child.id().to_string()));
        client.close();
    }
    sizes.sort();
    let size = sizes[sizes.len() / 2];
    println!(
        "  VmRSS: {}",
        sizes.iter().map(|&s| mib(s)).collect::<Vec<_>>().join(", ")
    );
    report.row(
        "idle `cordon mcp` resident set, all 5 built-ins loaded",
        mib(size),
        "-".into(),
        "< 30 MiB",
        Some(size < 30 * MIB),
    );

    // What stays resident after large calls: each plugin's pooled memory keeps the pages a
    // call dirtied, up to a bound, for the next call.
    let big = dirs.ws.join("rss-edit.txt");
    std::fs::write(&big, hundred_thousand_lines()).unwrap();
    let mut client = Client::spawn(&mut cordon_mcp(dirs));
    client.initialize();
    client.call("read_file", &json!({"path": "1m.txt"}));
    client.call(
        "edit_file",
        &json!({"path": "rss-edit.txt", "dry_run": true,
                "edits": [{"old": "value_50000 =", "new": "value_50001 ="}]}),
    );
    std::thread::sleep(Duration::from_millis(200));
    let after = rss_of(&client.child.id().to_string());
    client.close();
    let _ = std::fs::remove_file(&big);
    println!(
        "  VmRSS after a default read and a 5.8 MB edit_file dry run: {}",
        mib(after)
    );
    report.row(
        "`cordon mcp` resident set after a 1 MiB read and a 5.8 MB edit (dry run)",
        mib(after),
        format!("+{}", mib(after.saturating_sub(size))),
        "(information)",
        None,
    );
}
