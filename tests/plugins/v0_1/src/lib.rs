//! A plugin built against `cordon:tool` 0.1.0, as first released (`wit/0.1.0`), committed with
//! its component (`v0_1.wasm`) as it was built then: the tests load that file, not a rebuild,
//! so they show that cordon still serves what plugins built against 0.1.0 expect. Should the
//! fixture itself have to change, `cargo build --release --target wasm32-wasip2 -p v0_1` builds
//! it, and its `v0_1.wasm` replaces the committed one.
//!
//! Its tools touch what changed in 0.2.0: `write` calls `files.replace`, whose error gained a
//! case; `context` reports the call's context, which gained a field; `run` calls
//! `shell.run`, whose status gained a case. Each reports what it got as plainly as it can,
//! so a test sees what the host handed a 0.1.0 plugin.

wit_bindgen::generate!({
    path: "../../../wit/0.1.0",
    world: "plugin-with-capabilities",
});

use cordon::tool::files::{self, ReplaceError};
use cordon::tool::shell::{self, Status};
use cordon::tool::types::{Context, Counter, Declaration, Display, Kind, Outcome};
use exports::cordon::tool::tool::Guest;
use serde_json::Value;

/// The input schema of a tool taking the string fields `fields`.
fn schema(fields: &[&str]) -> String {
    let properties: serde_json::Map<String, Value> = fields
        .iter()
        .map(|f| (f.to_string(), serde_json::json!({"type": "string"})))
        .collect();
    serde_json::json!({
        "type": "object",
        "properties": properties,
        "required": fields,
        "additionalProperties": false,
    })
    .to_string()
}

fn declaration(name: &str, description: &str, fields: &[&str], kind: Kind) -> Declaration {
    Declaration {
        name: name.into(),
        description: description.into(),
        input_schema: schema(fields),
        kind,
        display: Display {
            icon: "🧪".into(),
            key_argument: fields.first().map(|f| f.to_string()),
            preview_output: true,
        },
        counter: Counter {
            key: "fixture_calls".into(),
            icon: "🧪".into(),
            singular: "fixture call".into(),
            plural: "fixture calls".into(),
        },
    }
}

fn outcome(output: String, failed: bool) -> Outcome {
    Outcome {
        output,
        trailer: None,
        omitted_bytes: 0,
        failed,
        locations: Vec::new(),
        diff: None,
    }
}

/// The string field `name` of `input`, which the host validated against the schema.
fn field(input: &Value, name: &str) -> String {
    input[name].as_str().unwrap_or_default().to_string()
}

struct Fixture;

impl Guest for Fixture {
    fn tools(_cwd: String) -> Vec<Declaration> {
        vec![
            declaration(
                "write",
                "Writes text to a file through files.replace.",
                &["path", "text"],
                Kind::Edit,
            ),
            declaration("context", "Reports the call's context.", &[], Kind::Read),
            declaration(
                "run",
                "Runs a command through shell.run.",
                &["command"],
                Kind::Execute,
            ),
        ]
    }

    fn call(name: String, input: String, context: Context) -> Outcome {
        let input: Value = serde_json::from_str(&input).unwrap_or_default();
        match name.as_str() {
            "write" => {
                let path = field(&input, "path");
                match files::replace(&path, field(&input, "text").as_bytes()) {
                    Ok(()) => outcome(format!("wrote {path}"), false),
                    Err(error) => outcome(replace_error(error), true),
                }
            }
            "context" => outcome(
                format!(
                    "cwd: {}; dry-run: {}; max-output: {}",
                    context.cwd, context.dry_run, context.max_output
                ),
                false,
            ),
            "run" => {
                let done = shell::run(&field(&input, "command"));
                let status = match done.status {
                    Status::Exited(code) => format!("exited {code}"),
                    Status::Signaled(name) => format!("signaled {name}"),
                    Status::TimedOut(secs) => format!("timed-out {secs}"),
                    Status::Refused(why) => format!("refused {why}"),
                };
                outcome(format!("{}[{status}]", done.output), false)
            }
            _ => outcome(format!("no tool named {name:?}"), true),
        }
    }
}

/// The error's case and text.
fn replace_error(error: ReplaceError) -> String {
    match error {
        ReplaceError::NotPermitted(text) => format!("not-permitted: {text}"),
        ReplaceError::NoParent(text) => format!("no-parent: {text}"),
        ReplaceError::IsDirectory(text) => format!("is-directory: {text}"),
        ReplaceError::Io(text) => format!("io: {text}"),
    }
}

export!(Fixture);
