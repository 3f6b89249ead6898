//! The command-line contract: subcommands, exit statuses, input handling, validation,
//! truncation and the compile cache.

use serde_json::{Value, json};

use crate::util::Cordon;

#[test]
fn tools_json_lists_name_description_schema_and_kind() {
    let cordon = Cordon::new();
    let run = cordon.run(&["tools", "--json"]);
    assert_eq!(run.code, 0, "{}", run.stderr);
    let tools: Vec<Value> = serde_json::from_str(&run.stdout).unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    for expected in ["bash", "read_file", "write_file", "edit_file"] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }
    let read = tools.iter().find(|t| t["name"] == "read_file").unwrap();
    assert_eq!(read["kind"], "read");
    assert_eq!(read["input_schema"]["type"], "object");
    assert!(read["input_schema"]["properties"]["path"].is_object());
    assert!(!read["description"].as_str().unwrap().is_empty());
    let edit = tools.iter().find(|t| t["name"] == "edit_file").unwrap();
    assert_eq!(edit["kind"], "edit");
}

#[test]
fn no_edit_tools_hides_the_file_tools() {
    let cordon = Cordon::new().with_args(&["--no-edit-tools"]);
    let run = cordon.run(&["tools", "--json"]);
    let tools: Vec<Value> = serde_json::from_str(&run.stdout).unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["bash"]);
    let call = cordon.call("read_file", json!({"path": "x"}));
    assert_eq!(call.code, 1);
    assert!(
        call.stdout.starts_with("Unknown tool \"read_file\""),
        "{}",
        call.stdout
    );
}

#[test]
fn unknown_tool_is_a_failed_outcome_listing_the_tools() {
    let run = Cordon::new().call("nope", json!({}));
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stdout,
        "Unknown tool \"nope\". Declared tools: bash, read_file, write_file, edit_file"
    );
}

#[test]
fn malformed_json_is_a_failed_outcome() {
    let cordon = Cordon::new();
    let run = cordon.run(&["call", "read_file", "{\"path\": "]);
    assert_eq!(run.code, 1);
    assert!(
        run.stdout
            .starts_with("The input for read_file is not valid JSON: "),
        "{}",
        run.stdout
    );
    let run = cordon.run(&["call", "read_file", "[1]"]);
    assert_eq!(run.code, 1);
    assert_eq!(
        run.stdout,
        "The input for read_file must be a JSON object, not an array"
    );
}

#[test]
fn schema_errors_name_the_field_and_change_nothing() {
    let cordon = Cordon::new();
    let missing = cordon.call("write_file", json!({"path": "a.txt"}));
    assert_eq!(missing.code, 1);
    assert!(missing.stdout.starts_with("Invalid input for write_file: "));
    assert!(missing.stdout.contains("\"content\""), "{}", missing.stdout);
    let wrong = cordon.call("read_file", json!({"path": "a.txt", "start": "one"}));
    assert!(wrong.stdout.contains("start: "), "{}", wrong.stdout);
    let unknown = cordon.call(
        "write_file",
        json!({"path": "a.txt", "content": "x", "mode": 1}),
    );
    assert!(unknown.stdout.contains("mode"), "{}", unknown.stdout);
    let nested = cordon.call(
        "edit_file",
        json!({"path": "a.txt", "edits": [{"old": "x"}]}),
    );
    assert!(nested.stdout.contains("edits[0]"), "{}", nested.stdout);
    assert!(!cordon.path("a.txt").exists());
}

#[test]
fn input_can_come_from_stdin() {
    let cordon = Cordon::new();
    cordon.write("notes.txt", "from stdin\n");
    let run = cordon.run_with_stdin(&["call", "read_file", "-"], r#"{"path": "notes.txt"}"#);
    assert_eq!(run.code, 0, "{}", run.stderr);
    assert_eq!(run.stdout, "from stdin\n");
}

#[test]
fn usage_errors_exit_2() {
    let cordon = Cordon::new();
    assert_eq!(cordon.run(&["call"]).code, 2);
    assert_eq!(cordon.run(&["--max-output", "lots", "tools"]).code, 2);
    let missing = Cordon::new().with_args(&["--workspace", "/nonexistent/cordon-ws"]);
    let run = missing.run(&["tools"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("--workspace"), "{}", run.stderr);
}

#[test]
fn output_is_cut_at_max_output_characters_with_a_notice() {
    let cordon = Cordon::new().with_args(&["--max-output", "10"]);
    cordon.write("long.txt", "ééééééééééééééééééééé\n");
    let run = cordon.call("read_file", json!({"path": "long.txt"}));
    assert_eq!(run.code, 0);
    let (kept, notice) = run.stdout.split_once('\n').unwrap();
    assert_eq!(kept, "éééééééééé");
    assert!(
        notice.starts_with("[output truncated: 12 more characters omitted."),
        "{notice}"
    );
}

#[test]
fn a_second_start_loads_compiled_plugins_from_the_cache() {
    let cache = tempfile::tempdir().unwrap();
    let cordon = Cordon::new();
    let run = || {
        cordon
            .command()
            .env("CORDON_CACHE_DIR", cache.path())
            .env("RUST_LOG", "cordon=debug")
            .args(["--no-edit-tools", "tools"])
            .output()
            .unwrap()
    };
    let first = String::from_utf8_lossy(&run().stderr).into_owned();
    assert!(first.contains("compiling 1 plugin(s)"), "{first}");
    assert!(first.contains("compiled component"), "{first}");
    let second = String::from_utf8_lossy(&run().stderr).into_owned();
    assert!(
        second.contains("loaded compiled component from cache"),
        "{second}"
    );
    assert!(!second.contains("compiling"), "{second}");
}

/// The README's option tables list every global option of `cordon --help`, and the README
/// names every option of each subcommand's.
#[test]
fn every_option_of_help_is_in_the_readme() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("read the README");
    let options = |args: &[&str]| -> Vec<String> {
        let run = Cordon::new().run(args);
        assert_eq!(run.code, 0, "{run:?}");
        let flags: Vec<String> = (run.stdout.lines())
            .filter_map(|line| {
                let line = line.trim_start();
                let line = line.split_once(", ").map_or(line, |(_, long)| long);
                let flag = line.strip_prefix("--")?.split([' ', '=', '<']).next()?;
                Some(format!("--{flag}"))
            })
            .filter(|f| f != "--help" && f != "--version")
            .collect();
        assert!(!flags.is_empty(), "no options in {}", run.stdout);
        flags
    };
    let global = options(&["--help"]);
    assert!(global.contains(&"--max-timeout".to_string()), "{global:?}");
    for flag in &global {
        assert!(
            readme.contains(&format!("\n| `{flag}")),
            "{flag} of cordon --help has no row in the README's option tables"
        );
    }
    for sub in ["tools", "call", "session", "mcp", "doctor"] {
        for flag in options(&[sub, "--help"]) {
            assert!(
                readme.contains(&format!("`{flag}")),
                "{flag} of cordon {sub} --help is not in the README"
            );
        }
    }
}
