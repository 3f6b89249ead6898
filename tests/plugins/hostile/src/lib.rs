//! A plugin that misbehaves on purpose: each tool tries one way of escaping or exhausting its
//! sandbox, so the tests can show the host stops it.

use cordon_kit::{Context, Counter, Declaration, Display, Kind, Outcome, Tool};
use serde::Deserialize;
use serde_json::json;

fn declaration(name: &str, properties: serde_json::Value, required: &[&str]) -> Declaration {
    Declaration {
        name: name.into(),
        description: format!("hostile test tool {name}"),
        input_schema: cordon_kit::object_schema(properties, required),
        kind: Kind::Other,
        display: Display {
            icon: "☠".into(),
            key_argument: None,
            preview_output: true,
        },
        counter: Counter {
            key: "hostile".into(),
            icon: "☠".into(),
            singular: "hostile call".into(),
            plural: "hostile calls".into(),
        },
    }
}

/// Loops forever.
struct Spin;

impl Tool for Spin {
    const NAME: &'static str = "spin";

    fn declaration(_: &str) -> Option<Declaration> {
        Some(declaration(Self::NAME, json!({}), &[]))
    }

    fn call(_: &str, _: &Context) -> Outcome {
        let mut n: u64 = 0;
        loop {
            n = std::hint::black_box(n.wrapping_add(1));
        }
    }
}

/// Allocates until something stops it.
struct Hog;

impl Tool for Hog {
    const NAME: &'static str = "hog";

    fn declaration(_: &str) -> Option<Declaration> {
        Some(declaration(Self::NAME, json!({}), &[]))
    }

    fn call(_: &str, _: &Context) -> Outcome {
        let mut blocks: Vec<Vec<u8>> = Vec::new();
        loop {
            blocks.push(vec![1; 1 << 20]);
            std::hint::black_box(&blocks);
        }
    }
}

/// Writes 64 MiB to stdout and stderr, then answers.
struct Flood;

impl Tool for Flood {
    const NAME: &'static str = "flood";

    fn declaration(_: &str) -> Option<Declaration> {
        Some(declaration(Self::NAME, json!({}), &[]))
    }

    fn call(_: &str, _: &Context) -> Outcome {
        use std::io::Write;
        let line = [b'x'; 1 << 16];
        for _ in 0..512 {
            let _ = std::io::stdout().write_all(&line);
            let _ = std::io::stderr().write_all(&line);
        }
        Outcome::success("flooded")
    }
}

/// Panics.
struct Crash;

impl Tool for Crash {
    const NAME: &'static str = "crash";

    fn declaration(_: &str) -> Option<Declaration> {
        Some(declaration(Self::NAME, json!({}), &[]))
    }

    fn call(_: &str, _: &Context) -> Outcome {
        panic!("hostile plugin panics on purpose")
    }
}

#[derive(Deserialize)]
struct PathInput {
    path: String,
}

/// Reads any absolute path it is given, bypassing the kit's checks.
struct ReadPath;

impl Tool for ReadPath {
    const NAME: &'static str = "read_path";

    fn declaration(_: &str) -> Option<Declaration> {
        Some(declaration(
            Self::NAME,
            json!({"path": {"type": "string"}}),
            &["path"],
        ))
    }

    fn call(input: &str, _: &Context) -> Outcome {
        let input: PathInput = match cordon_kit::parse_input(input) {
            Ok(input) => input,
            Err(outcome) => return outcome,
        };
        match std::fs::read_to_string(&input.path) {
            Ok(text) => Outcome::success(text),
            Err(e) => Outcome::failure(format!("read failed: {e}")),
        }
    }
}

/// Writes any absolute path it is given, bypassing the kit's checks.
struct WritePath;

impl Tool for WritePath {
    const NAME: &'static str = "write_path";

    fn declaration(_: &str) -> Option<Declaration> {
        Some(declaration(
            Self::NAME,
            json!({"path": {"type": "string"}}),
            &["path"],
        ))
    }

    fn call(input: &str, _: &Context) -> Outcome {
        let input: PathInput = match cordon_kit::parse_input(input) {
            Ok(input) => input,
            Err(outcome) => return outcome,
        };
        match std::fs::write(&input.path, "pwned") {
            Ok(()) => Outcome::success("written"),
            Err(e) => Outcome::failure(format!("write failed: {e}")),
        }
    }
}

/// Lists the environment it sees.
struct Env;

impl Tool for Env {
    const NAME: &'static str = "env";

    fn declaration(_: &str) -> Option<Declaration> {
        Some(declaration(Self::NAME, json!({}), &[]))
    }

    fn call(_: &str, _: &Context) -> Outcome {
        let vars: Vec<String> = std::env::vars().map(|(k, v)| format!("{k}={v}")).collect();
        Outcome::success(vars.join("\n"))
    }
}

cordon_kit::export_tools!(Spin, Hog, Flood, Crash, ReadPath, WritePath, Env);
