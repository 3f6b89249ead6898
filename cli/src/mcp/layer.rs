//! The layer's tools, offered to the model by `cordon mcp --layer-tools`: its diff, a
//! checkpoint, and a rollback to one. Never accept or discard: the user's tree changes only
//! when the user says so. Those that change the layer's mount run alone, between calls
//! ([`Live::apply`]).

use std::sync::Arc;

use rmcp::model::{CallToolResult, ContentBlock, JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use cordon::layer::{Done, Live, Op};
use cordon::output::quote;

const DIFF: &str = "layer_diff";
const CHECKPOINT: &str = "layer_checkpoint";
const ROLLBACK: &str = "layer_rollback";

/// Whether `name` is one of the layer's tools.
pub(super) fn is_tool(name: &str) -> bool {
    [DIFF, CHECKPOINT, ROLLBACK].contains(&name)
}

/// The layer's tools, as `tools/list` shows them: name, title, description, input schema,
/// and whether each is read-only and destructive.
pub(super) fn tools() -> Vec<Tool> {
    let label = json!({"type": "string", "description": "The checkpoint's label: letters, digits, '.', '_' and '-'."});
    [
        (
            DIFF,
            "Layer diff",
            "Show what you changed in the workspace so far, as a unified diff against the \
             user's tree (which changes only when the user accepts).",
            json!({"type": "object", "properties": {"stat": {"type": "boolean", "description": "A summary per file instead of the diff."}}}),
            (true, false),
        ),
        (
            CHECKPOINT,
            "Layer checkpoint",
            "Name the workspace's current state, to roll back to it later with layer_rollback. \
             Returns the checkpoint's label.",
            json!({"type": "object", "properties": {"label": label}}),
            (false, false),
        ),
        (
            ROLLBACK,
            "Layer rollback",
            "Bring the workspace back to a checkpoint, exactly: every change made since is \
             dropped, and so are the checkpoints taken after it.",
            json!({"type": "object", "properties": {"label": label}, "required": ["label"]}),
            (false, true),
        ),
    ]
    .into_iter()
    .map(|(name, title, description, schema, (read_only, destructive))| {
        let schema: JsonObject = schema.as_object().cloned().unwrap_or_default();
        let hints = ToolAnnotations::with_title(title)
            .read_only(read_only)
            .open_world(false);
        // As for the other tools, a read-only one leaves out the destructive hint.
        let hints = match read_only {
            true => hints,
            false => hints.destructive(destructive),
        };
        Tool::new(name, description, Arc::new(schema))
            .with_title(title)
            .with_annotations(hints)
    })
    .collect()
}

/// Runs the layer's tool `name` with `input`; a failure is a tool execution error whose
/// text says what to do.
pub(super) async fn call(live: &Live, name: &str, input: &Value) -> CallToolResult {
    let text = |key: &str| match input.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(other) => Err(format!("\"{key}\" must be a string, got: {}", quote(other))),
    };
    let op = match name {
        DIFF => Ok(Op::Diff {
            stat: input.get("stat") == Some(&Value::Bool(true)),
        }),
        CHECKPOINT => text("label").map(|label| Op::Checkpoint { label }),
        _ => text("label").and_then(|label| {
            let label = label.ok_or("\"label\" is required: the checkpoint to roll back to")?;
            Ok(Op::Rollback { label })
        }),
    };
    let done = match op {
        Ok(op) => live.apply(op).await.map_err(|e| e.to_string()),
        Err(why) => Err(why),
    };
    let text = done.map(|done| match done {
        Done::Diff(diff) if diff.is_empty() => {
            "No changes: the workspace is as the user's tree.".to_string()
        }
        Done::Diff(diff) => diff,
        Done::Checkpoint(label) => format!(
            "Checkpoint {label} taken: layer_rollback with this label brings the workspace \
             back to this state."
        ),
        Done::RolledBack(label) => format!(
            "Rolled back to checkpoint {label}: the workspace is as it was then, and the \
             checkpoints taken after it are gone."
        ),
        // No other operation is offered; its answer would be the session's.
        other => serde_json::to_string(&other).expect("an answer serializes"),
    });
    match text {
        Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
        Err(why) => CallToolResult::error(vec![ContentBlock::text(why)]),
    }
}
