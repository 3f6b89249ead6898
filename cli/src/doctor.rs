//! `cordon doctor`: the receipt of the bash sandbox. It runs one confined command (`true`)
//! under the options given, as a bash call would, and prints each layer of confinement that
//! was in force, or why the sandbox could not be set up; then the home of commands and the
//! toolchains granted (`--toolchains`), with what each grants, and whether a workspace layer
//! can be mounted here (`--layer`).

use std::process::ExitCode;

use cordon::sandbox::{self, Policy, Status};
use cordon::toolchains::Toolchain;

/// Runs the probe and prints its receipt: exit 0 when the command ran, 1 when it was refused.
pub async fn run(
    policy: Policy,
    toolchains: Vec<Toolchain>,
    layers: Result<(), String>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let home = policy.home.clone();
    let done = tokio::task::spawn_blocking(move || sandbox::run(&policy, "true")).await?;
    let refusal = match &done.status {
        Status::Exited(0) => None,
        other => Some(
            other
                .refusal()
                .unwrap_or_else(|| format!("the probe command `true` did not succeed: {other:?}")),
        ),
    };
    if json {
        let report = serde_json::json!({
            "ran": refusal.is_none(),
            "refusal": refusal,
            "layers": done.layers,
            "home": home,
            "toolchains": toolchains,
            "workspace_layers": {"available": layers.is_ok(), "refusal": layers.as_ref().err()},
        });
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else if let Some(why) = &refusal {
        println!("bash cannot run: {why}");
    } else {
        println!("bash commands run with these layers of confinement:");
        for layer in &done.layers {
            let state = layer.enforcement.as_str();
            println!("  {:<13} {state:<9} {}", layer.name, layer.detail);
        }
    }
    if !json {
        match &layers {
            Ok(()) => println!("layers: available (--layer)"),
            Err(why) => println!("layers: unavailable: {why}"),
        }
        match &home {
            Some(dir) => println!("home: {} (kept between calls)", dir.display()),
            None => println!("home: empty at every call"),
        }
        if toolchains.is_empty() {
            println!("toolchains: none granted (--toolchains finds them)");
        }
        for t in &toolchains {
            let list = |paths: &[std::path::PathBuf]| {
                let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
                shown.join(", ")
            };
            println!("toolchain {}:", t.name);
            for (what, paths) in [("read", &t.read), ("write", &t.write), ("PATH", &t.path)] {
                if !paths.is_empty() {
                    println!("  {what:<5} {}", list(paths));
                }
            }
            for (name, value) in &t.env {
                println!("  env   {name}={value}");
            }
        }
    }
    Ok(if refusal.is_none() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
