//! Calling: a call is found, parsed and validated against its tool's schema, run in a fresh
//! instance of its plugin, and its output bounded and redacted.

use serde_json::Value;

use super::{Runtime, Watch};
use crate::bindings::cordon::tool::types::{Context, Diff, Location};
use crate::output;
use crate::plugin::{Plugin, Reply, Tool};
use crate::schema::Problem;

/// The most bytes a call's input may have; a larger one is refused before any plugin runs.
/// The plugin holds the input twice (as text and parsed) and a file tool hands it back in its
/// outcome (the new text of a file), all within a built-in's 1 GiB of memory.
pub const MAX_INPUT_BYTES: usize = 64 << 20;

/// What a call produced, ready for the model (the WIT `outcome` is what the plugin handed back;
/// this is it after the host's pipeline).
#[derive(Clone, Debug)]
pub struct CallOutcome {
    /// The text the model sees: truncated, with any status line last.
    pub output: String,
    /// Whether the call failed.
    pub failed: bool,
    /// The files it read or changed.
    pub locations: Vec<Location>,
    /// The change it made, or would make in a dry run (when [`crate::Options::diffs`] is on).
    pub diff: Option<Diff>,
    /// The layers of confinement of the shell command it ran, if it ran one.
    pub sandbox: Vec<crate::sandbox::Layer>,
    /// How that command ended: the exit status its text's trailer tells the model, for a
    /// program, which cannot tell the trailer from a command's own output ending alike.
    pub exit: Option<crate::sandbox::Status>,
    /// The connections cordon's proxy refused to that command (`host:port` and the line its
    /// output ends with).
    pub blocked: Vec<crate::sandbox::Blocked>,
}

impl CallOutcome {
    /// A failure that happened before or around the plugin: bad input, unknown tool, crash.
    pub fn failure(output: impl Into<String>) -> Self {
        CallOutcome {
            output: output.into(),
            failed: true,
            locations: Vec::new(),
            diff: None,
            sandbox: Vec::new(),
            exit: None,
            blocked: Vec::new(),
        }
    }
}

impl From<CallError> for CallOutcome {
    fn from(error: CallError) -> Self {
        CallOutcome::failure(error.to_string())
    }
}

/// A call whose tool was found and whose input passed validation.
pub struct Call<'a> {
    /// The plugin that declares the tool.
    pub plugin: &'a Plugin,
    /// The tool.
    pub tool: &'a Tool,
    /// The input, parsed and valid.
    pub input: Value,
}

/// Why a call cannot run: the model named no declared tool, or gave an input that does not
/// fit. The message is the text of the failed outcome the model reads.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    #[error("Unknown tool \"{}\". Declared tools: {}", output::quote(name), declared.join(", "))]
    UnknownTool { name: String, declared: Vec<String> },
    #[error(
        "The input for {tool} is {:.1} MiB, more than the {} MiB a call may carry; send less in \
         one call (a file this large is better produced by a command)",
        *bytes as f64 / f64::from(1 << 20),
        MAX_INPUT_BYTES >> 20
    )]
    TooLarge { tool: String, bytes: usize },
    #[error("The input for {tool} is not valid JSON: {source}")]
    NotJson {
        tool: String,
        source: serde_json::Error,
    },
    #[error("The input for {tool} must be a JSON object, not {found}")]
    NotObject { tool: String, found: &'static str },
    #[error("Invalid input for {tool}: {}", problems.iter().map(Problem::to_string).collect::<Vec<_>>().join("; "))]
    InvalidInput {
        tool: String,
        problems: Vec<Problem>,
    },
}

impl Runtime {
    /// Runs the tool `name` with `input` (a JSON object as text). With `dry_run` the plugin
    /// computes the outcome but changes nothing.
    pub async fn call(&self, name: &str, input: &str, dry_run: bool) -> CallOutcome {
        match self.prepare_text(name, input) {
            Ok(call) => self.run(&call, dry_run, Watch::default()).await,
            Err(error) => error.into(),
        }
    }

    /// Finds the tool `name` and checks `input` against its schema: everything a call needs
    /// before anything runs.
    pub fn prepare(&self, name: &str, input: Value) -> Result<Call<'_>, CallError> {
        let (plugin, tool) = self.validate(name, &input)?;
        Ok(Call {
            plugin,
            tool,
            input,
        })
    }

    /// Finds the tool `name` and checks `input` against its schema, without taking the input:
    /// for a caller that keeps it whatever the answer.
    pub fn validate(&self, name: &str, input: &Value) -> Result<(&Plugin, &Tool), CallError> {
        let (plugin, tool) = self.find(name)?;
        check(tool, input)?;
        Ok((plugin, tool))
    }

    /// [`Runtime::prepare`] for a front door that receives the input as text: an input larger
    /// than [`MAX_INPUT_BYTES`] is refused before it is parsed.
    pub fn prepare_text(&self, name: &str, input: &str) -> Result<Call<'_>, CallError> {
        let (plugin, tool) = self.find(name)?;
        let input = Self::parse(name, input)?;
        check(tool, &input)?;
        Ok(Call {
            plugin,
            tool,
            input,
        })
    }

    /// Parses the text of an input for the tool `name`: an input larger than
    /// [`MAX_INPUT_BYTES`] is refused before it is parsed.
    pub fn parse(name: &str, input: &str) -> Result<Value, CallError> {
        if input.len() > MAX_INPUT_BYTES {
            return Err(CallError::TooLarge {
                tool: name.to_string(),
                bytes: input.len(),
            });
        }
        serde_json::from_str(input).map_err(|source| CallError::NotJson {
            tool: name.to_string(),
            source,
        })
    }

    /// The tool `name` with its plugin, or the error that lists the declared tools.
    pub fn find(&self, name: &str) -> Result<(&Plugin, &Tool), CallError> {
        self.tool(name).ok_or_else(|| CallError::UnknownTool {
            name: name.to_string(),
            declared: self
                .tools()
                .map(|(_, t)| t.declaration.name.clone())
                .collect(),
        })
    }

    /// Runs a prepared call in a fresh instance of its plugin, followed by `watch`.
    pub async fn run(&self, call: &Call<'_>, dry_run: bool, watch: Watch) -> CallOutcome {
        let context = Context {
            cwd: call.plugin.grants().cwd.to_string_lossy().into_owned(),
            dry_run,
            max_output: u32::try_from(self.resolved.max_output).unwrap_or(u32::MAX),
            want_diff: self.resolved.diffs,
        };
        let name = &call.tool.declaration.name;
        // The layer's mount stays as it is while the call runs.
        let _layer = match &self.layer {
            Some(live) => Some(live.using().await),
            None => None,
        };
        match call
            .plugin
            .call(name, call.input.to_string(), context, watch)
            .await
        {
            Ok(reply) => self.finish(reply),
            Err(failure) => CallOutcome::failure(failure.to_string()),
        }
    }

    fn finish(&self, reply: Reply) -> CallOutcome {
        let Reply {
            outcome,
            sandbox,
            exit,
            blocked,
            mut protected,
        } = reply;
        let mut output = output::finish(
            &output::redact(&outcome.output, &self.secrets),
            outcome.trailer.as_deref(),
            self.resolved.max_output,
            outcome.omitted_bytes,
        );
        // What the plugin itself was refused (it saw only `not-permitted`), once per path.
        protected.sort();
        protected.dedup();
        for refusal in protected {
            output.push_str(&format!("\n[cordon: refused: {refusal}]"));
        }
        CallOutcome {
            output,
            failed: outcome.failed,
            locations: outcome.locations,
            diff: outcome.diff,
            sandbox,
            exit,
            blocked,
        }
    }
}

/// Checks that `input` is an object that fits the schema of `tool`.
pub fn check(tool: &Tool, input: &Value) -> Result<(), CallError> {
    let name = &tool.declaration.name;
    if !input.is_object() {
        return Err(CallError::NotObject {
            tool: name.clone(),
            found: json_type(input),
        });
    }
    tool.schema
        .check(input)
        .map_err(|problems| CallError::InvalidInput {
            tool: name.clone(),
            problems,
        })
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
